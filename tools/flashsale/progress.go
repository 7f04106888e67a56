package flashsale

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// progress draws one line that a terminal updates in place (a bar); to a
// file or pipe it writes a plain line at most every few seconds, so logs of
// CI runs stay short.
type progress struct {
	w    io.Writer
	tty  bool
	last time.Time
	open bool // a bar line is on the terminal without its newline
}

func newProgress(w io.Writer) *progress {
	f, ok := w.(*os.File)
	tty := false
	if ok {
		if st, err := f.Stat(); err == nil {
			tty = st.Mode()&os.ModeCharDevice != 0
		}
	}
	return &progress{w: w, tty: tty}
}

// barWidth is the number of cells of a bar.
const barWidth = 30

// bar renders done of total as [#####.....] with its percentage.
func bar(done, total int64) string {
	if total <= 0 {
		total = 1
	}
	n := min(max(int(done*barWidth/total), 0), barWidth)
	return fmt.Sprintf("[%s%s] %3d%%", strings.Repeat("#", n), strings.Repeat(".", barWidth-n), min(done*100/total, 100))
}

// update shows label's progress; on a terminal in place, elsewhere every 2 s.
func (p *progress) update(label string, done, total int64, extra string) {
	p.status(label, fmt.Sprintf("%s %d/%d %s", bar(done, total), done, total, extra))
}

// status shows one line of label's state, like update without a bar.
func (p *progress) status(label, text string) {
	line := fmt.Sprintf("%-10s %s", label, text)
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K%s", line)
		p.open = true
		return
	}
	if time.Since(p.last) >= 2*time.Second {
		fmt.Fprintln(p.w, line)
		p.last = time.Now()
	}
}

// printf ends a bar line (if one is open) and prints a message line.
func (p *progress) printf(format string, a ...any) {
	if p.open {
		fmt.Fprintln(p.w)
		p.open = false
	}
	fmt.Fprintf(p.w, format, a...)
}
