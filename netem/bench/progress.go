//go:build linux

package bench

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/bullylab/bullylab/netem/bench/results"
)

// Progress reports a bench's runs: on a terminal a one-line bar redrawn in
// place, saying which run of all the bench's runs is under way, its phase,
// the time elapsed and an ETA, with one line per finished run (passed or
// failed) printed above it; elsewhere (CI logs, a pipe) that one plain
// line per finished run alone, which logs keep and grep finds. Its methods
// are safe for concurrent use.
type Progress struct {
	mu    sync.Mutex
	w     io.Writer
	tty   bool
	width func() int
	now   func() time.Time

	total, done, failed int
	start               time.Time
	// busy is the finished runs' durations summed, for the ETA: a run
	// lasts from its Start (or the previous Done) to its Done.
	busy     time.Duration
	mark     time.Time // when the run under way started
	scenario string    // the run under way's scenario, "" between runs
	phase    Phase     // and its phase
	drawn    bool      // a bar is on the current line
	// tick, on a real terminal, redraws the bar every second so that
	// elapsed and ETA move during a long phase; Finish closes it.
	tick chan struct{}
}

// Phase is the step a run is in, as the bar shows it.
type Phase string

// A run's phases, in order: RunBench reports them as its steps begin.
const (
	// PhaseBuild builds the testbed and starts its nodes and capture.
	PhaseBuild Phase = "build"
	// PhaseSettle waits for the nodes to follow the boot leader without
	// electing.
	PhaseSettle Phase = "settle"
	// PhaseInject runs the scenario's schedule: its faults and its waits,
	// the measured wait for a leader included.
	PhaseInject Phase = "inject"
	// PhaseMeasure waits for the election's tail to end and reads the
	// nodes' counters; after the teardown it is the capture's analysis.
	PhaseMeasure Phase = "measure"
	// PhaseTeardown stops the capture and the nodes and removes the
	// testbed.
	PhaseTeardown Phase = "teardown"
)

// ProgressOptions override what NewProgress detects, for tests.
type ProgressOptions struct {
	// Terminal forces the bar (true) or plain lines (false); nil detects.
	Terminal *bool
	// Width is the terminal width; 0 asks the terminal, else 80.
	Width int
	// Now replaces time.Now.
	Now func() time.Time
}

// NewProgress reports total runs, those of every scenario, on w. w is a
// terminal when it is an *os.File on which TCGETS succeeds and TERM is not
// "dumb".
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
		p.tty = isFile && results.IsTerminal(f) && os.Getenv("TERM") != "dumb"
	}
	switch {
	case o.Width > 0:
		p.width = func() int { return o.Width }
	case isFile:
		p.width = func() int { return results.TerminalWidth(f) }
	default:
		p.width = func() int { return 80 }
	}
	p.start = p.now()
	p.mark = p.start
	if p.tty && o.Terminal == nil && o.Now == nil {
		p.tick = make(chan struct{})
		go p.ticker(time.Second)
	}
	return p
}

// ticker redraws the bar every interval while a run is under way, until
// Finish.
func (p *Progress) ticker(interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-p.tick:
			return
		case <-t.C:
			p.mu.Lock()
			if p.scenario != "" {
				p.drawLocked()
			}
			p.mu.Unlock()
		}
	}
}

// RunUpdate is a finished run, as Progress reports it.
type RunUpdate struct {
	Scenario string // the scenario's key
	// Index and Runs place the run within its scenario; the lines count
	// the bench's runs instead, those of every scenario.
	Index int
	Runs  int
	OK    bool
	// Leader and TimeToLeader are the measured election of a run that
	// passed.
	Leader       string
	TimeToLeader time.Duration
	FailureKind  string
	Failure      string
}

// Start says the bench's next run, of scenario, began: it builds its
// testbed first. index and runs place it within its scenario.
func (p *Progress) Start(scenario string, index, runs int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.scenario = scenario
	p.phase = PhaseBuild
	p.mark = p.now()
	if p.tty {
		p.drawLocked()
	}
}

// Phase says the run under way entered phase; the bar shows it.
func (p *Progress) Phase(phase Phase) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.phase == phase {
		return
	}
	p.phase = phase
	if p.tty && p.scenario != "" {
		p.drawLocked()
	}
}

// Done reports a finished run: one line, numbered among all the bench's
// runs, "run 4/30 leader-crash: leader n15 after 506ms".
func (p *Progress) Done(u RunUpdate) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done++
	now := p.now()
	p.busy += now.Sub(p.mark)
	p.mark = now
	p.scenario, p.phase = "", ""
	line := fmt.Sprintf("run %d/%d %s: ", p.done, p.total, u.Scenario)
	if u.OK {
		line += fmt.Sprintf("leader %s after %s", u.Leader, results.FormatNS(int64(u.TimeToLeader)))
	} else {
		p.failed++
		line += fmt.Sprintf("FAILED (%s) %s", u.FailureKind, oneLine(u.Failure))
	}
	if p.tty {
		// The run's line replaces the bar and stays in the scrollback;
		// the next Start draws the bar below it.
		p.clearLocked()
	}
	fmt.Fprintln(p.w, line)
}

// Finish ends the report with a line of totals.
func (p *Progress) Finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tick != nil {
		close(p.tick)
		p.tick = nil
	}
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

// phaseWidth is the longest phase's: the bar after it stays put.
const phaseWidth = len(PhaseTeardown)

// drawLocked redraws the bar, its run counted among all the bench's:
//
//	run 4/30 leader-crash: inject   ▕█████░░░░░░░░░░░░░░░▏ elapsed 1m02s  ETA 4m10s  1 failed
//
// A terminal too narrow for the bar gets the words alone, cut to fit.
func (p *Progress) drawLocked() {
	head := fmt.Sprintf("run %d/%d %s: %-*s", p.done+1, p.total, p.scenario, phaseWidth, p.phase)
	tail := fmt.Sprintf("elapsed %s  ETA %s", fmtClock(p.now().Sub(p.start)), p.etaLocked())
	if p.failed > 0 {
		tail += fmt.Sprintf("  %d failed", p.failed)
	}
	width := p.width()
	barW := min(40, width-utf8.RuneCountInString(head)-utf8.RuneCountInString(tail)-5)
	line := head + "  " + tail
	if barW >= 8 {
		fill := 0
		if p.total > 0 {
			fill = min(barW, barW*p.done/p.total)
		}
		line = head + " ▕" + strings.Repeat("█", fill) + strings.Repeat("░", barW-fill) + "▏ " + tail
	}
	// A line wider than the terminal wraps, and \r then redraws only its
	// second half.
	if r := []rune(line); len(r) > width-1 && width > 1 {
		line = string(r[:width-1])
	}
	fmt.Fprint(p.w, "\r\x1b[K"+line)
	p.drawn = true
}

// etaLocked is the time the runs not yet finished should take at the mean
// duration of those that did, less what the run under way has had (but no
// more than a mean's worth): "--" before any run finished.
func (p *Progress) etaLocked() string {
	if p.done == 0 {
		return "--"
	}
	left := p.total - p.done
	if left <= 0 {
		return "0s"
	}
	mean := p.busy / time.Duration(p.done)
	eta := mean * time.Duration(left)
	if p.scenario != "" {
		eta -= min(p.now().Sub(p.mark), mean)
	}
	return fmtClock(eta)
}

// fmtClock is d to the second as a clock reads it: "42s", "1m02s",
// "1h05m00s".
func fmtClock(d time.Duration) string {
	s := int64(d.Round(time.Second) / time.Second)
	switch {
	case s < 60:
		return fmt.Sprintf("%ds", max(s, 0))
	case s < 3600:
		return fmt.Sprintf("%dm%02ds", s/60, s%60)
	}
	return fmt.Sprintf("%dh%02dm%02ds", s/3600, s/60%60, s%60)
}

// plural is "1 run", "2 runs".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}
