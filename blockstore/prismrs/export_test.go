package prismrs

import "context"

// SkipWriteBack turns off reads' phase 2 (the write-back): the negative
// control of the linearizability test.
func SkipWriteBack(c *Client) { c.noWriteBack = true }

// WriteOne is a writer that stops half-way: phase 1 at a majority, then
// phase 2 at replica rep alone.
func WriteOne(ctx context.Context, c *Client, id uint64, data []byte, rep int) error {
	tag, err := c.nextTag(ctx, id)
	if err != nil {
		return err
	}
	return c.install(ctx, id, tag, data, 1<<rep, 1)
}
