package fault

import (
	"strings"
	"testing"
	"time"
)

func TestImpairmentValidate(t *testing.T) {
	bad := []Impairment{
		{Delay: -time.Millisecond},
		{Loss: 101},
		{Duplicate: -1},
		{Reorder: 10},
	}
	for _, imp := range bad {
		if imp.Validate() == nil {
			t.Errorf("%+v accepted", imp)
		}
	}
	good := Impairment{Delay: 10 * time.Millisecond, Jitter: 20 * time.Millisecond, Loss: 100, Reorder: 5}
	if err := good.Validate(); err != nil {
		t.Errorf("%+v rejected: %v", good, err)
	}
	if s := good.String(); s != "delay 10ms±20ms loss 100% reorder 5%" {
		t.Errorf("String() = %q", s)
	}
}

func TestKindList(t *testing.T) {
	got := KindList()
	if n := strings.Count(got, ", ") + 1; n != len(Kinds) || !strings.HasPrefix(got, "crash, restart") || !strings.HasSuffix(got, "leave, join, cut, clock") {
		t.Errorf("KindList() = %q, want the %d kinds in documentation order", got, len(Kinds))
	}
}

func TestClockSkewString(t *testing.T) {
	for skew, want := range map[ClockSkew]string{
		{Offset: 90 * time.Second, RatePPM: 500}: "offset +1m30s rate +500 ppm",
		{Offset: -2 * time.Minute}:               "offset -2m0s",
		{RatePPM: -20}:                           "offset 0s rate -20 ppm",
	} {
		if got := skew.String(); got != want {
			t.Errorf("%#v: %q, want %q", skew, got, want)
		}
	}
}
