package prismrs

// SkipWriteBack turns off reads' phase 2 (the write-back): the negative
// control of the linearizability test.
func SkipWriteBack(c *Client) { c.noWriteBack = true }
