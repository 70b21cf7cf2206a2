// Package wire encodes the software NIC's requests and responses
// (nic.Request, nic.Response) as bytes: the body of a tcp frame
// (docs/wire.md) and of a shm ring message are the same encoding.
// Little-endian throughout; decoders validate everything and return an
// error matching ErrMalformed for anything inconsistent, never panic.
package wire
