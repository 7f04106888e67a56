# Images of docker-compose.yml. The default (last) stage is the production
# image: the seckill binary alone (cmd/seckill: api, worker, migrate and the
# operator commands). The stage dev holds the development binary
# (cmd/seckill-dev), for the payment provider simulator (`seckill-dev paysim`).
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -o /out/seckill ./cmd/seckill

FROM build AS build-dev
RUN CGO_ENABLED=0 go build -o /out/seckill-dev ./cmd/seckill-dev

FROM gcr.io/distroless/static-debian12:nonroot AS dev
COPY --from=build-dev /out/seckill-dev /seckill-dev
USER nonroot:nonroot
ENTRYPOINT ["/seckill-dev"]

# nonroot: uid 65532, no shell; the processes need no privilege (ports above 1024).
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/seckill /seckill
USER nonroot:nonroot
ENTRYPOINT ["/seckill"]
