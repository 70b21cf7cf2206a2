package memnode

import (
	"bytes"
	"crypto/subtle"
)

// Hello is what a client sends as the private data of its cm connection
// request: the service it wants and the server's token.
//
// On the wire it is the bare token when Service is empty (the memory
// node's clients: `cm.Options{PrivateData: []byte(token)}`), and
// Service, a NUL byte and the token otherwise (the NUL and token left out
// when there is no token).
type Hello struct {
	// Service names what the client wants served, e.g. a store design;
	// empty for the memory node.
	Service string
	// Token is the server's auth token (Config.Token); empty when it has
	// none.
	Token string
}

// Marshal encodes h as cm private data.
func (h Hello) Marshal() []byte {
	switch {
	case h.Service == "":
		return []byte(h.Token)
	case h.Token == "":
		return []byte(h.Service)
	}
	return []byte(h.Service + "\x00" + h.Token)
}

// parseHello decodes a client's private data for a server whose service
// is named (named) or is the memory node (not named).
func parseHello(b []byte, named bool) Hello {
	if !named {
		return Hello{Token: string(b)}
	}
	if i := bytes.IndexByte(b, 0); i >= 0 {
		return Hello{Service: string(b[:i]), Token: string(b[i+1:])}
	}
	return Hello{Service: string(b)}
}

// tokenOK reports whether got is the server's token want (always true
// when the server has none). The comparison takes constant time.
func tokenOK(got, want string) bool {
	return want == "" || subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}
