package api

import _ "embed"

// OpenAPI is the OpenAPI 3.1 description of this API (openapi.yaml), served
// at GET /v1/openapi.yaml.
//
//go:embed openapi.yaml
var OpenAPI []byte
