package picrew

import (
	"bytes"
	"errors"
	"io"
)

// lastLineReference is lastLine as it was before it read backwards in
// chunks: one read of up to limit+1 bytes before off. The chunked lastLine
// must answer as it does for every input (it panics on a negative off,
// which lastLine refuses instead).
func lastLineReference(r io.ReaderAt, off, limit int64) ([]byte, error) {
	start := max(0, off-limit-1)
	buf := make([]byte, off-start)
	if _, err := r.ReadAt(buf, start); err != nil {
		return nil, err
	}
	if len(buf) == 0 || buf[len(buf)-1] != '\n' {
		return nil, errors.New("no line ends there")
	}
	body := buf[:len(buf)-1]
	i := bytes.LastIndexByte(body, '\n')
	if i < 0 && start > 0 {
		return nil, errors.New("line too long")
	}
	return body[i+1:], nil
}
