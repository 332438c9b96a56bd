package opensm

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
)

// outputLogger turns what OpenSM writes on stdout or stderr into log records.
// OpenSM prints every option it loads on stdout, the M_Key, SM_Key and SA_Key
// included ("Loading Cached Option:sa_key = 0x..."), so any line that mentions a
// key is dropped. The rest is logged at debug level, except error lines on
// stderr (parse errors of the partitions file are copied there), which are
// warnings.
type outputLogger struct {
	log    *slog.Logger
	stream string // "stdout" or "stderr"

	mu  sync.Mutex
	buf []byte // an unfinished line
}

// maxOutputLine bounds an unfinished line kept in memory.
const maxOutputLine = 64 * 1024

func (o *outputLogger) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.buf = append(o.buf, p...)
	for {
		i := bytes.IndexByte(o.buf, '\n')
		if i < 0 {
			break
		}
		o.logLine(string(o.buf[:i]))
		o.buf = o.buf[i+1:]
	}
	if len(o.buf) > maxOutputLine {
		o.logLine(string(o.buf))
		o.buf = o.buf[:0]
	}
	return len(p), nil
}

// Flush logs an unfinished last line.
func (o *outputLogger) Flush() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.buf) > 0 {
		o.logLine(string(o.buf))
		o.buf = o.buf[:0]
	}
}

func (o *outputLogger) logLine(line string) {
	line = strings.TrimSpace(line)
	if line == "" || strings.Trim(line, "-*") == "" {
		return
	}
	if strings.Contains(strings.ToLower(line), "key") {
		return // may carry a secret
	}
	level := slog.LevelDebug
	if o.stream == "stderr" && strings.Contains(line, "ERR") { // "ERR 3113", "PARSE ERROR"
		level = slog.LevelWarn
	}
	o.log.Log(context.Background(), level, "opensm output", "stream", o.stream, "line", line)
}
