// Package ids derives the stable business IDs of seckill (docs/spec.md#stable-ids).
//
// reservation_id and message_id are computed, not random: HMAC-SHA256 under a
// server secret of the request's identity, truncated to 128 bits and shaped
// as an RFC 9562 version-8 UUID. A retry of the same request, even after Redis
// lost its request map, derives the same reservation and the same message.
// The key version is stored with each reservation so a key rotation keeps old
// requests stable.
package ids

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"

	"github.com/google/uuid"
)

// SchemaVersion of ORDER_CREATE_REQUESTED; part of message_id, so a payload
// change gets a new message identity.
const SchemaVersion = 1

// Deriver derives IDs with versioned keys.
type Deriver struct {
	keys    map[int][]byte
	current int
}

// NewDeriver returns a Deriver over keys (version → secret) that derives new
// IDs with version current.
func NewDeriver(keys map[int][]byte, current int) (*Deriver, error) {
	if _, ok := keys[current]; !ok {
		return nil, fmt.Errorf("id key version %d not among the configured keys", current)
	}
	for v, k := range keys {
		if len(k) < 32 {
			return nil, fmt.Errorf("id key version %d is shorter than 32 bytes", v)
		}
	}
	return &Deriver{keys: keys, current: current}, nil
}

// CurrentVersion is the key version new reservations use.
func (d *Deriver) CurrentVersion() int { return d.current }

// Reservation is the set of IDs of one reservation.
type Reservation struct {
	KeyVersion    int
	ReservationID uuid.UUID
	MessageID     uuid.UUID
}

// ForRequest derives the reservation and message IDs of (activity, sku, user,
// request) under key version ver (0 means the current version).
func (d *Deriver) ForRequest(ver int, activityID, skuID, userID int64, requestID uuid.UUID) (Reservation, error) {
	if ver == 0 {
		ver = d.current
	}
	key, ok := d.keys[ver]
	if !ok {
		return Reservation{}, fmt.Errorf("id key version %d is not configured", ver)
	}
	rid := derive(key, "RESERVATION", i64(activityID), i64(skuID), i64(userID), requestID[:])
	return Reservation{
		KeyVersion:    ver,
		ReservationID: rid,
		MessageID:     derive(key, "ORDER_CREATE_REQUESTED", rid[:], []byte(strconv.Itoa(SchemaVersion))),
	}, nil
}

// Named derives the fixed ID of a follow-up operation of an aggregate, e.g.
// Named("ORDER", reservationID) or Named("COMPENSATE", reservationID), so every
// retry of that operation reuses one ID.
func Named(kind string, aggregate uuid.UUID, parts ...string) uuid.UUID {
	fields := make([][]byte, 0, len(parts)+1)
	fields = append(fields, aggregate[:])
	for _, p := range parts {
		fields = append(fields, []byte(p))
	}
	return derive(namedKey, kind, fields...)
}

// namedKey is not a secret: Named IDs follow from IDs that already are
// unguessable; it only separates this derivation from others.
var namedKey = []byte("seckill/ids/named/v1")

func i64(v int64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(v)) // #nosec G115 -- the bits are hashed, not the value: a wrap only changes the hash
	return b[:]
}

// derive computes HMAC-SHA256(key, kind ‖ len-prefixed fields) and shapes the
// first 16 bytes as a version-8 UUID. Length prefixes keep "1|23" and "12|3" apart.
func derive(key []byte, kind string, fields ...[]byte) uuid.UUID {
	m := hmac.New(sha256.New, key)
	writeField(m, []byte(kind))
	for _, f := range fields {
		writeField(m, f)
	}
	var u uuid.UUID
	copy(u[:], m.Sum(nil)[:16])
	u[6] = (u[6] & 0x0f) | 0x80 // version 8: custom
	u[8] = (u[8] & 0x3f) | 0x80 // RFC 9562 variant
	return u
}

func writeField(m interface{ Write([]byte) (int, error) }, f []byte) {
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(f))) // #nosec G115 -- fields are ids and short names, far below 4 GiB
	_, _ = m.Write(n[:])
	_, _ = m.Write(f)
}

// ErrForged is wrapped by Verify's refusal: the IDs a message carries are not
// the ones its fields derive under any key this process holds.
var ErrForged = errors.New("ids do not derive from the message's fields")

// Verify re-derives the reservation and message IDs of (activity, sku, user,
// request) under key version ver and refuses IDs that differ: only a holder
// of the ID secrets (the gateway) can mint a reservation a consumer accepts.
// The error names the first ID that differs, never a key.
func (d *Deriver) Verify(ver int, activityID, skuID, userID int64, requestID, reservationID, messageID uuid.UUID) error {
	if ver == 0 {
		return fmt.Errorf("%w: key_version is missing", ErrForged)
	}
	want, err := d.ForRequest(ver, activityID, skuID, userID, requestID)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrForged, err)
	}
	switch {
	case hmac.Equal(want.ReservationID[:], reservationID[:]) && hmac.Equal(want.MessageID[:], messageID[:]):
		return nil
	case !hmac.Equal(want.ReservationID[:], reservationID[:]):
		return fmt.Errorf("%w: reservation_id is not the one key version %d derives", ErrForged, ver)
	default:
		return fmt.Errorf("%w: message_id is not the one key version %d derives", ErrForged, ver)
	}
}
