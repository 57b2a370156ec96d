package report

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseDiagramRuns(t *testing.T) {
	for in, want := range map[string]DiagramRuns{
		"median,slowest":    {Median: true, Slowest: true},
		" all ":             {All: true},
		"12, 3,median,3":    {Median: true, Runs: []int{3, 12}},
		"Slowest,1":         {Slowest: true, Runs: []int{1}},
		"median , SLOWEST":  {Median: true, Slowest: true},
		"007,all,slowest,2": {Slowest: true, All: true, Runs: []int{2, 7}},
	} {
		got, err := ParseDiagramRuns(in)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%q: %+v, %v; want %+v", in, got, err, want)
		}
	}
	for in, word := range map[string]string{
		"":                     `empty`,
		"median,fastest":       `"fastest"`,
		"0":                    `"0"`,
		"-1":                   `"-1"`,
		"+3":                   `"+3"`,
		"3,,4":                 `""`,
		"1e3":                  `"1e3"`,
		"median;slowest":       `"median;slowest"`,
		"99999999999999999999": `"99999999999999999999"`,
		"x\ny":                 `"x\ny"`,
	} {
		_, err := ParseDiagramRuns(in)
		if err == nil {
			t.Errorf("%q: no error", in)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, word) || strings.ContainsAny(msg, "\r\n") {
			t.Errorf("%q: error %q does not name %s in one line", in, msg, word)
		}
	}
	dr, _ := ParseDiagramRuns("4,31")
	if err := dr.CheckRuns(30); err == nil || err.Error() != "run 31, but each scenario runs 30 times" {
		t.Errorf("run beyond the runs: %v", err)
	}
	if err := dr.CheckRuns(31); err != nil {
		t.Errorf("run 31 of 31: %v", err)
	}
}

// FuzzParseDiagramRuns: any input parses, and then reads back the same
// from its String, or fails in one line.
func FuzzParseDiagramRuns(f *testing.F) {
	for _, s := range []string{"median,slowest", "all", "1,2,3", "median, 7", "", ",", "0", "+1", "x\ny", "MEDIAN", "18446744073709551616"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		dr, err := ParseDiagramRuns(s)
		if err != nil {
			if msg := err.Error(); strings.ContainsAny(msg, "\r\n") || len(msg) > 512 {
				t.Fatalf("%q: error %q", s, msg)
			}
			return
		}
		if dr.IsZero() {
			t.Fatalf("%q parsed to nothing", s)
		}
		back, err := ParseDiagramRuns(dr.String())
		if err != nil || !reflect.DeepEqual(back, dr) {
			t.Fatalf("%q: %+v reads back from %q as %+v, %v", s, dr, dr.String(), back, err)
		}
	})
}
