// The wire format of the four messages the services use, by hand over protowire (no
// protoc: see main.go). Field numbers are those of bench/tonic-grpc/proto: benchmark.proto
// and gRPC interop's messages.proto. Unknown fields are skipped, as proto3 requires.
package main

import (
	"fmt"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
)

// SumRequest { int32 a = 1; int32 b = 2; }
type sumRequest struct{ a, b int32 }

// SumReply { int32 result = 1; }
type sumReply struct{ result int32 }

// StreamingOutputCallRequest: only response_parameters (2), and of each ResponseParameters
// only size (1).
type streamingOutputCallRequest struct{ sizes []int32 }

// StreamingOutputCallResponse { Payload payload = 1; }, Payload { bytes body = 2; } (type
// COMPRESSABLE, 0, is proto3's default and not written).
type streamingOutputCallResponse struct{ body []byte }

type codec struct{}

func (codec) Name() string { return "proto" }

func (codec) Marshal(v any) (mem.BufferSlice, error) {
	var b []byte
	switch m := v.(type) {
	case *sumReply:
		if m.result != 0 {
			b = protowire.AppendTag(b, 1, protowire.VarintType)
			b = protowire.AppendVarint(b, uint64(int64(m.result)))
		}
	case *streamingOutputCallResponse:
		var payload []byte
		if len(m.body) > 0 {
			payload = protowire.AppendTag(payload, 2, protowire.BytesType)
			payload = protowire.AppendBytes(payload, m.body)
		}
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendBytes(b, payload)
	default:
		return nil, fmt.Errorf("codec: cannot marshal %T", v)
	}
	return mem.BufferSlice{mem.SliceBuffer(b)}, nil
}

func (codec) Unmarshal(data mem.BufferSlice, v any) error {
	b := data.Materialize()
	switch m := v.(type) {
	case *sumRequest:
		return fields(b, func(num protowire.Number, typ protowire.Type, val []byte, x uint64) error {
			if typ == protowire.VarintType && (num == 1 || num == 2) {
				if num == 1 {
					m.a = int32(x)
				} else {
					m.b = int32(x)
				}
			}
			return nil
		})
	case *streamingOutputCallRequest:
		return fields(b, func(num protowire.Number, typ protowire.Type, val []byte, _ uint64) error {
			if num != 2 || typ != protowire.BytesType {
				return nil
			}
			var size int32
			err := fields(val, func(n protowire.Number, t protowire.Type, _ []byte, x uint64) error {
				if n == 1 && t == protowire.VarintType {
					size = int32(x)
				}
				return nil
			})
			m.sizes = append(m.sizes, size)
			return err
		})
	default:
		return fmt.Errorf("codec: cannot unmarshal into %T", v)
	}
}

// fields calls f for each field of the message in b: its number, type, and its value (the
// bytes of a length-delimited field, the number of a varint).
func fields(b []byte, f func(protowire.Number, protowire.Type, []byte, uint64) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		var val []byte
		var x uint64
		switch typ {
		case protowire.VarintType:
			x, n = protowire.ConsumeVarint(b)
		case protowire.BytesType:
			val, n = protowire.ConsumeBytes(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if err := f(num, typ, val, x); err != nil {
			return err
		}
	}
	return nil
}
