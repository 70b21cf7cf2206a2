package pilaf

// SetTear makes the node write entries and extents a few bytes at a time,
// yielding between them, so that concurrent GETs read them torn.
func SetTear(s *Server) { s.mu.Lock(); s.tear = true; s.mu.Unlock() }

// SetTrust makes c skip its CRC checks.
func SetTrust(c *Client) { c.trust = true }
