package abdrpc

// SkipWriteBack makes c's reads return the newest value of a majority
// without writing it back: the negative control of the tests, which
// must then see a read return an older value than an earlier read did.
func SkipWriteBack(c *Client) { c.noWriteBack = true }
