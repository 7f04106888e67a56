package temporalx

// The payload codec: every payload a client or worker sends to Temporal
// (workflow and activity inputs and results, queries, memos, user metadata)
// is encrypted with AES-256-GCM, so history read without the codec carries
// no user or request id (docs/operations.md, "Payload encryption").

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"

	"github.com/seckill/seckill/internal/platform/config"
)

// Payload metadata of an encrypted payload.
const (
	EncodingEncrypted = "binary/encrypted"
	MetadataKeyID     = "encryption-key-id"
)

// ErrUnknownKey is returned when a payload names a key version not held.
var ErrUnknownKey = errors.New("temporalx: payload encrypted with a key version not held")

// Codec encrypts payloads with the current key version and decrypts them with
// any held version. Payloads whose encoding is not EncodingEncrypted pass
// through Decode unchanged: histories recorded before encryption (and
// workflows started then) keep replaying.
type Codec struct {
	current string
	aeads   map[string]cipher.AEAD
}

// NewCodec builds a Codec from version → 32-byte key; current encrypts.
func NewCodec(current int, keys map[int][]byte) (*Codec, error) {
	c := &Codec{current: strconv.Itoa(current), aeads: make(map[string]cipher.AEAD, len(keys))}
	for v, k := range keys {
		if len(k) != 32 {
			return nil, fmt.Errorf("temporalx: payload key version %d has %d bytes, want 32 (AES-256)", v, len(k))
		}
		b, err := aes.NewCipher(k)
		if err != nil {
			return nil, fmt.Errorf("temporalx: payload key version %d: %w", v, err)
		}
		g, err := cipher.NewGCM(b)
		if err != nil {
			return nil, fmt.Errorf("temporalx: payload key version %d: %w", v, err)
		}
		c.aeads[strconv.Itoa(v)] = g
	}
	if c.aeads[c.current] == nil {
		return nil, fmt.Errorf("temporalx: current payload key version %d is not among the keys", current)
	}
	return c, nil
}

// CodecFor builds the Codec of cfg (SECKILL_PAYLOAD_SECRETS, SECKILL_PAYLOAD_KEY_VERSION).
func CodecFor(cfg config.Config) (*Codec, error) {
	keys, err := cfg.PayloadKeys()
	if err != nil {
		return nil, err
	}
	return NewCodec(cfg.PayloadKeyVersion, keys)
}

// DataConverter is the SDK's default converter with c encrypting its payloads.
func (c *Codec) DataConverter() converter.DataConverter {
	return converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), c)
}

// Encode encrypts each payload (its serialized form, metadata included)
// with the current key; the key version is bound as additional data.
func (c *Codec) Encode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	g := c.aeads[c.current]
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		plain, err := proto.Marshal(p)
		if err != nil {
			return nil, fmt.Errorf("temporalx: marshal payload: %w", err)
		}
		nonce := make([]byte, g.NonceSize(), g.NonceSize()+len(plain)+g.Overhead())
		if _, err := rand.Read(nonce); err != nil {
			return nil, fmt.Errorf("temporalx: payload nonce: %w", err)
		}
		out[i] = &commonpb.Payload{
			Metadata: map[string][]byte{converter.MetadataEncoding: []byte(EncodingEncrypted), MetadataKeyID: []byte(c.current)},
			Data:     g.Seal(nonce, nonce, plain, []byte(c.current)),
		}
	}
	return out, nil
}

// Decode decrypts each encrypted payload with the key version it names and
// returns any other payload as it is.
func (c *Codec) Decode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		if string(p.GetMetadata()[converter.MetadataEncoding]) != EncodingEncrypted {
			out[i] = p
			continue
		}
		id := string(p.GetMetadata()[MetadataKeyID])
		g := c.aeads[id]
		if g == nil {
			return nil, fmt.Errorf("%w: %q", ErrUnknownKey, id)
		}
		data := p.GetData()
		if len(data) < g.NonceSize() {
			return nil, errors.New("temporalx: encrypted payload shorter than its nonce")
		}
		plain, err := g.Open(nil, data[:g.NonceSize()], data[g.NonceSize():], []byte(id))
		if err != nil {
			return nil, fmt.Errorf("temporalx: decrypt payload (key version %s): %w", id, err)
		}
		dec := &commonpb.Payload{}
		if err := proto.Unmarshal(plain, dec); err != nil {
			return nil, fmt.Errorf("temporalx: unmarshal decrypted payload: %w", err)
		}
		out[i] = dec
	}
	return out, nil
}

// maxCodecBody bounds a codec request (a payload blob is at most 2 MiB by
// Temporal's default limits; the UI sends a page of them at once).
const maxCodecBody = 32 << 20

// CodecHandler serves c over HTTP as the Web UI and CLI expect of a codec
// server (POST /encode, /decode), answering CORS requests from the origins
// in allowOrigins only.
func CodecHandler(c *Codec, allowOrigins ...string) http.Handler {
	h := converter.NewPayloadCodecHTTPHandler(c)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if o := r.Header.Get("Origin"); o != "" && slices.Contains(allowOrigins, o) {
			w.Header().Set("Access-Control-Allow-Origin", o)
			w.Header().Set("Access-Control-Allow-Credentials", "true")
			w.Header().Set("Access-Control-Allow-Methods", "POST, GET, OPTIONS")
			w.Header().Set("Access-Control-Allow-Headers", "X-Namespace, Content-Type, Authorization")
			w.Header().Add("Vary", "Origin")
		}
		if r.Method == http.MethodOptions {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxCodecBody)
		h.ServeHTTP(w, r)
	})
}
