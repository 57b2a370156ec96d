package bench

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Progress reports a bench's runs as they finish: on a terminal a one-line
// bar redrawn in place, with failures printed above it as they happen;
// elsewhere (CI logs, a pipe) one plain line per run, which logs keep and
// grep finds. Its methods are safe for concurrent use.
type Progress struct {
	mu    sync.Mutex
	w     io.Writer
	tty   bool
	width func() int
	now   func() time.Time

	total, done, failed int
	start               time.Time
	running             string // "leader-crash 3/30" while a run is under way
	last                string // what the last run found, for the bar
	drawn               bool   // a bar is on the current line
}

// ProgressOptions override what NewProgress detects, for tests.
type ProgressOptions struct {
	// Terminal forces the bar (true) or plain lines (false); nil detects.
	Terminal *bool
	// Width is the terminal width; 0 asks the terminal, else 80.
	Width int
	// Now replaces time.Now.
	Now func() time.Time
}

// NewProgress reports total runs on w. w is a terminal when it is an
// *os.File on which TCGETS succeeds and TERM is not "dumb".
func NewProgress(w io.Writer, total int, opts ...ProgressOptions) *Progress {
	var o ProgressOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	p := &Progress{w: w, total: total, now: o.Now}
	if p.now == nil {
		p.now = time.Now
	}
	f, isFile := w.(*os.File)
	if o.Terminal != nil {
		p.tty = *o.Terminal
	} else {
		p.tty = isFile && isTerminal(f) && os.Getenv("TERM") != "dumb"
	}
	switch {
	case o.Width > 0:
		p.width = func() int { return o.Width }
	case isFile:
		p.width = func() int { return terminalWidth(f) }
	default:
		p.width = func() int { return 80 }
	}
	p.start = p.now()
	return p
}

// RunUpdate is a finished run, as Progress reports it.
type RunUpdate struct {
	Scenario string // the scenario's key
	Index    int    // run number within the scenario, from 1
	Runs     int    // runs of the scenario
	OK       bool
	Leader   string
	// TimeToLeader is the measured election of a run that passed.
	TimeToLeader time.Duration
	FailureKind  string
	Failure      string
}

// Start says a run began; the bar shows it.
func (p *Progress) Start(scenario string, index, runs int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.running = fmt.Sprintf("%s %d/%d", scenario, index, runs)
	if p.tty {
		p.drawLocked()
	}
}

// Done reports a finished run.
func (p *Progress) Done(u RunUpdate) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done++
	p.running = ""
	line := fmt.Sprintf("run %d/%d %s: ", u.Index, u.Runs, u.Scenario)
	if u.OK {
		line += fmt.Sprintf("leader %s after %s", u.Leader, fmtNS(int64(u.TimeToLeader)))
		p.last = fmt.Sprintf("%s after %s", u.Leader, fmtNS(int64(u.TimeToLeader)))
	} else {
		p.failed++
		line += fmt.Sprintf("FAILED (%s) %s", u.FailureKind, oneLine(u.Failure))
		p.last = "run failed"
	}
	if !p.tty {
		fmt.Fprintln(p.w, line)
		return
	}
	if !u.OK {
		// Failures stay on screen, above the bar.
		p.clearLocked()
		fmt.Fprintln(p.w, line)
	}
	p.drawLocked()
}

// Finish ends the report with a line of totals.
func (p *Progress) Finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty {
		p.clearLocked()
	}
	fmt.Fprintf(p.w, "%s in %s, %d failed\n", plural(p.done, "run", "runs"), p.now().Sub(p.start).Round(time.Second), p.failed)
}

func (p *Progress) clearLocked() {
	if p.drawn {
		fmt.Fprint(p.w, "\r\x1b[K")
		p.drawn = false
	}
}

// drawLocked redraws the bar:
//
//	leader-crash 4/30 ▕██████░░░░░░░░░░░░▏ 3/30 · 1 failed · n15 after 577ms · ETA 1m20s
func (p *Progress) drawLocked() {
	var tail []string
	tail = append(tail, fmt.Sprintf("%d/%d", p.done, p.total))
	if p.failed > 0 {
		tail = append(tail, fmt.Sprintf("%d failed", p.failed))
	}
	if p.last != "" {
		tail = append(tail, p.last)
	}
	tail = append(tail, "ETA "+p.etaLocked())
	head := p.running
	if head == "" {
		head = "bench"
	}
	rest := " " + strings.Join(tail, " · ")
	width := p.width()
	barW := min(40, width-utf8.RuneCountInString(head)-utf8.RuneCountInString(rest)-4)
	var bar string
	if barW >= 8 {
		fill := 0
		if p.total > 0 {
			fill = min(barW, barW*p.done/p.total)
		}
		bar = " ▕" + strings.Repeat("█", fill) + strings.Repeat("░", barW-fill) + "▏"
	}
	line := head + bar + rest
	// A line wider than the terminal wraps, and \r then redraws only its
	// second half.
	if r := []rune(line); len(r) > width-1 && width > 1 {
		line = string(r[:width-1])
	}
	fmt.Fprint(p.w, "\r\x1b[K"+line)
	p.drawn = true
}

func (p *Progress) etaLocked() string {
	if p.done == 0 || p.total <= p.done {
		if p.total <= p.done && p.done > 0 {
			return "0s"
		}
		return "--"
	}
	elapsed := p.now().Sub(p.start)
	eta := elapsed / time.Duration(p.done) * time.Duration(p.total-p.done)
	return eta.Round(time.Second).String()
}
