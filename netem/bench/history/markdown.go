package history

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"time"
)

// WriteMarkdown writes the report as a pull-request comment: the overall
// verdict, then per scenario and algorithm each metric's verdict, its
// change points and a table of the last entries.
func (r *Report) WriteMarkdown(w io.Writer, last int) error {
	b := bufio.NewWriter(w)
	verdict := "no regression"
	if r.Regressed() {
		verdict = "**regression**"
	}
	fmt.Fprintf(b, "## Regression history: %s at %s\n\n", verdict, mdCell(r.Newest))
	fmt.Fprintf(b, "%d entries in `%s`; change points by E-Divisive means (p <= %g, %d permutations, segments of %d or more), "+
		"a regression when the newest entry starts a rise of %s or more.\n",
		r.Entries, mdCell(r.File), r.Detect.Significance, r.Detect.Permutations, r.Detect.MinSegment, percent(r.MinEffect))
	for i := 0; i < len(r.Series); {
		j := i
		for j < len(r.Series) && r.Series[j].Key == r.Series[i].Key {
			j++
		}
		writeMarkdownGroup(b, r.Series[i:j], last, r.MinEffect)
		i = j
	}
	return b.Flush()
}

func writeMarkdownGroup(b *bufio.Writer, group []Series, last int, minEffect float64) {
	fmt.Fprintf(b, "\n### %s\n\n", mdCell(group[0].Key))
	for i := range group {
		s := &group[i]
		line := strings.TrimPrefix(s.VerdictLine(minEffect), s.Title()+": ")
		if s.Verdict == VerdictRegression || s.Verdict == VerdictNoneOK {
			line = ":x: " + line
		}
		fmt.Fprintf(b, "- %s: %s\n", s.Metric.Title, mdCell(line))
	}
	changes := false
	for _, s := range group {
		changes = changes || len(s.Shifts) > 0
	}
	if changes {
		b.WriteString("\n| metric | change point | time | before (median) | after (median) | change | p | settings changed |\n")
		b.WriteString("|---|---|---|--:|--:|--:|--:|---|\n")
		for _, s := range group {
			for _, sh := range s.Shifts {
				e := &s.Entries[s.Points[sh.Index]]
				change := signedPercent(sh.Relative)
				if !sh.Effect {
					change += " (small)"
				}
				fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %.3f | %s |\n", s.Metric.Title, mdCell(sh.Commit), e.Time.UTC().Format(time.DateTime),
					s.Metric.Format(sh.Before), s.Metric.Format(sh.After), change, sh.PValue, mdCell(strings.Join(sh.Settings, ", ")))
			}
		}
	}
	entries := group[0].Entries
	from := max(0, len(entries)-last)
	fmt.Fprintf(b, "\n%d newest of %d entries:\n\n| commit | time | runs passed |", len(entries)-from, len(entries))
	for _, s := range group {
		fmt.Fprintf(b, " %s |", s.Metric.Title)
	}
	b.WriteString("\n|---|---|--:|")
	for range group {
		b.WriteString("--:|")
	}
	b.WriteString("\n")
	for i := from; i < len(entries); i++ {
		e := &entries[i]
		fmt.Fprintf(b, "| %s | %s | %d/%d |", mdCell(e.Commit), e.Time.UTC().Format(time.DateTime), e.OK, e.Runs)
		for _, s := range group {
			cell := "-"
			if e.OK > 0 {
				cell = s.Metric.Format(s.Metric.Value(e))
			}
			for _, sh := range s.Shifts {
				if s.Points[sh.Index] == i {
					cell = "**" + cell + "** (change point)"
				}
			}
			fmt.Fprintf(b, " %s |", cell)
		}
		b.WriteString("\n")
	}
}

// mdCell escapes what would end a table cell or start markup.
func mdCell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ", "\r", " ", "<", "&lt;", ">", "&gt;", "`", "'").Replace(s)
}
