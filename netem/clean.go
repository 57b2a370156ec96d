//go:build linux

package netem

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/vishvananda/netlink"
)

// CleanReport lists what Clean removed, and the runs it left alone.
type CleanReport struct {
	Runs       []string  // runs cleaned
	Live       []string  // runs skipped because their owner still runs
	Processes  []ProcRef // processes killed
	Namespaces []string
	Links      []string // veths in this process's namespace
	Mounts     []string // tmpfs mounts in state directories (a lab's node data)
	StateDirs  []string
	// Hidden lists namespaces that a later mount on NetnsDir hid and that
	// Clean left, as no run's it cleans (see netnsdir.go).
	Hidden []string
}

// Empty reports whether Clean found nothing to remove.
func (r CleanReport) Empty() bool {
	return len(r.Processes)+len(r.Namespaces)+len(r.Links)+len(r.Mounts)+len(r.StateDirs) == 0
}

func (r CleanReport) String() string {
	var b strings.Builder
	if r.Empty() {
		b.WriteString("nothing to clean")
	} else {
		fmt.Fprintf(&b, "cleaned %d runs: %d processes, %d namespaces, %d links, %d mounts, %d state directories",
			len(r.Runs), len(r.Processes), len(r.Namespaces), len(r.Links), len(r.Mounts), len(r.StateDirs))
	}
	if len(r.Live) > 0 {
		fmt.Fprintf(&b, "; left %d live runs alone (%s)", len(r.Live), strings.Join(r.Live, ", "))
	}
	if len(r.Hidden) > 0 {
		fmt.Fprintf(&b, "; left %d namespaces hidden under a later mount on %s, of no run known here (%s): `bullylab clean --run NAME` frees a run's",
			len(r.Hidden), NetnsDir, strings.Join(r.Hidden, ", "))
	}
	return b.String()
}

// leftovers is what one run left behind.
type leftovers struct {
	stateDirs []string // StateDir(run), and claim directories of a killed Build
	state     *RunState
	links     []string
}

// Clean removes what runs whose owning process is gone left behind: it
// kills their recorded processes (only when the PID still has the recorded
// start time) and any process still inside their namespaces, deletes their
// namespaces, any veth in this namespace named after them, and their state
// directories. It touches only objects named after a run that has a state
// directory, or after a run ID (names.go says why), and leaves runs whose
// owner still runs (a concurrent `bullylab up`, bench or test) alone.
// CleanRuns does the same for named runs only.
func Clean(ctx context.Context) (CleanReport, error) {
	return clean(ctx, nil)
}

// CleanRuns is Clean for the runs named, and nothing of any other run: what
// a test or script calls to remove what its own runs left, on a machine
// where other testbeds run. A named run is cleaned as Clean would clean
// it: not while its owner runs, and objects of a name that is no run ID
// only while its state directory exists or its namespaces are hidden (no
// path reaches them, so nobody uses them by name). It needs at least one name, and
// each must be a run name.
func CleanRuns(ctx context.Context, runs ...string) (CleanReport, error) {
	if len(runs) == 0 {
		return CleanReport{}, errors.New("clean: no run named")
	}
	only := make(map[string]bool, len(runs))
	for _, run := range runs {
		if err := CheckRunName(run); err != nil {
			return CleanReport{}, fmt.Errorf("clean: %w", err)
		}
		only[run] = true
	}
	return clean(ctx, only)
}

// clean is Clean, of the runs in only when it is not nil.
func clean(ctx context.Context, only map[string]bool) (CleanReport, error) {
	var rep CleanReport
	runs := map[string]*leftovers{}
	get := func(run string) *leftovers {
		if runs[run] == nil {
			runs[run] = &leftovers{}
		}
		return runs[run]
	}
	var errs []error
	if err := RestoreNetnsDir(); err != nil {
		errs = append(errs, err)
	}

	entries, err := os.ReadDir(StateRoot)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return rep, fmt.Errorf("clean: %w", err)
	}
	for _, e := range entries {
		name := e.Name()
		run := name
		if rest, ok := strings.CutPrefix(name, ".claim-"); ok {
			run, _, _ = strings.Cut(rest, "-")
		}
		if !e.IsDir() || !ValidRunName(run) {
			continue
		}
		dir := filepath.Join(StateRoot, name)
		lo := get(run)
		lo.stateDirs = append(lo.stateDirs, dir)
		st, err := readStateFile(filepath.Join(dir, StateFile))
		if err == nil && (lo.state == nil || name == run) {
			lo.state = st
		}
	}

	nsNames, err := listNamespaces("")
	if err != nil {
		errs = append(errs, fmt.Errorf("listing %s: %w", NetnsDir, err))
	}
	for _, ns := range nsNames {
		if run, _ := RunOfNamespace(ns); ValidRunID(run) || runs[run] != nil {
			get(run)
		}
	}
	hidden, err := hiddenRunNamespaces("")
	if err != nil {
		errs = append(errs, err)
	}
	for _, h := range hidden {
		// No path reaches a hidden namespace, so no one uses it by name:
		// a run named here is cleaned even without its state directory.
		run, ok := RunOfNamespace(h.name)
		switch {
		case ok && (ValidRunID(run) || runs[run] != nil || only[run]):
			get(run)
		case only == nil:
			rep.Hidden = append(rep.Hidden, h.name)
		}
	}

	links, err := netlink.LinkList()
	if err != nil {
		errs = append(errs, fmt.Errorf("listing links: %w", err))
	}
	for _, l := range links {
		name := l.Attrs().Name
		if run, ok := RunOfLink(name); ok && (ValidRunID(run) || runs[run] != nil) {
			lo := get(run)
			lo.links = append(lo.links, name)
		}
	}

	ids := make([]string, 0, len(runs))
	for run := range runs {
		ids = append(ids, run)
	}
	sort.Strings(ids)
	for _, run := range ids {
		if only != nil && !only[run] {
			continue
		}
		if err := ctx.Err(); err != nil {
			return rep, errors.Join(append(errs, err)...)
		}
		lo := runs[run]
		if lo.state != nil && lo.state.Owner.Alive() {
			rep.Live = append(rep.Live, fmt.Sprintf("%s (owner %d)", run, lo.state.Owner.PID))
			continue
		}
		if lo.state == nil {
			// Namespaces named like a run but built by other code (a test
			// fixture, `ip netns add`) have no owner on record; a process
			// holding one open is using it.
			ids, err := runNamespaceIDs(run)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if pids := nsHolders(ids); len(pids) > 0 {
				rep.Live = append(rep.Live, fmt.Sprintf("%s (no state; held open by %d)", run, pids[0]))
				continue
			}
		}
		if err := cleanRun(ctx, run, lo, &rep); err != nil {
			errs = append(errs, fmt.Errorf("run %s: %w", run, err))
		}
		rep.Runs = append(rep.Runs, run)
	}
	if err := errors.Join(errs...); err != nil {
		return rep, fmt.Errorf("clean: %w", err)
	}
	return rep, nil
}

func cleanRun(ctx context.Context, run string, lo *leftovers, rep *CleanReport) error {
	var errs []error
	var killed []ProcRef
	if lo.state != nil {
		for _, sp := range lo.state.Processes {
			st, err := readProcStat(sp.PID)
			if err != nil || st.startTime != sp.StartTime {
				continue // gone, or the PID now names another process
			}
			target := sp.PID
			if st.pgrp == sp.PID {
				target = -sp.PID // its group, children included
			}
			if err := syscall.Kill(target, syscall.SIGKILL); err == nil {
				killed = append(killed, sp.ProcRef)
			}
		}
	}
	if err := waitGone(ctx, killed); err != nil {
		errs = append(errs, err)
	}
	rep.Processes = append(rep.Processes, killed...)

	strays, err := killInNamespaces(ctx, run)
	rep.Processes = append(rep.Processes, strays...)
	if err != nil {
		errs = append(errs, err)
	}

	deleted, err := deleteRunNamespaces(run)
	rep.Namespaces = append(rep.Namespaces, deleted...)
	if err != nil {
		errs = append(errs, err)
	}

	for _, name := range lo.links {
		l, err := netlink.LinkByName(name)
		if err != nil {
			continue // went with its peer's namespace
		}
		if err := netlink.LinkDel(l); err != nil {
			errs = append(errs, fmt.Errorf("deleting link %s: %w", name, err))
			continue
		}
		rep.Links = append(rep.Links, name)
	}

	for _, dir := range lo.stateDirs {
		mounts, err := mountsUnder(dir)
		if err != nil {
			errs = append(errs, err)
		}
		for _, m := range mounts {
			if err := Unmount(m); err != nil {
				errs = append(errs, err)
				continue
			}
			rep.Mounts = append(rep.Mounts, m)
		}
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, fmt.Errorf("removing %s: %w", dir, err))
			continue
		}
		rep.StateDirs = append(rep.StateDirs, dir)
	}
	return errors.Join(errs...)
}

// mountsUnder returns the mount points inside dir, deepest first, from this
// process's mount table.
func mountsUnder(dir string) ([]string, error) {
	mounts, err := readMountInfo()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, m := range mounts {
		if strings.HasPrefix(m.point, dir+"/") {
			out = append(out, m.point)
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(out)))
	return out, nil
}
