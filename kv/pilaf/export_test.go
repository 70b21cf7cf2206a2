package pilaf

// SetTear makes the node write entries and extents a few bytes at a time,
// yielding between them, so that concurrent GETs read them torn.
func SetTear(s *Server) { s.mu.Lock(); s.tear = true; s.mu.Unlock() }

// SetTrust makes c skip its CRC checks.
func SetTrust(c *Client) { c.trust = true }

// HoldWrites has the node call hold with every PUT's (del false) or
// DELETE's key before it runs it: a test blocks there to hold a
// client's RPC while the client dies.
func HoldWrites(s *Server, hold func(del bool, key []byte)) {
	s.rpc.Handle(methodPut, s.timed(func(req, resp []byte) (int, error) {
		if len(req) >= 2 {
			if kl := int(req[0]) | int(req[1])<<8; 2+kl <= len(req) {
				hold(false, req[2:2+kl])
			}
		}
		return s.put(req, resp)
	}))
	s.rpc.Handle(methodDelete, s.timed(func(req, resp []byte) (int, error) {
		hold(true, req)
		return s.del(req, resp)
	}))
}
