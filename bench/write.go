package bench

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
)

// WriteFiles writes NAME.json, NAME.md and NAME.png for the result into
// dir, creating it if needed, and returns the paths written.
func WriteFiles(dir string, r *Result) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	writers := []struct {
		ext   string
		write func(io.Writer, *Result) error
	}{{".json", WriteJSON}, {".md", WriteMarkdown}, {".png", WritePNG}}
	var paths []string
	for _, wr := range writers {
		var buf bytes.Buffer
		if err := wr.write(&buf, r); err != nil {
			return paths, err
		}
		path := filepath.Join(dir, r.Name+wr.ext)
		if err := writeFile(path, buf.Bytes()); err != nil {
			return paths, err
		}
		paths = append(paths, path)
	}
	return paths, nil
}

// writeFile writes data to path through a temporary file, so a reader
// never sees half a result.
func writeFile(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	err = errors.Join(err, f.Chmod(0o644), f.Close())
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}
