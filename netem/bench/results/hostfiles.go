package results

import "fmt"

// HostProcess is a shared host process that ran some of a run's nodes.
type HostProcess struct {
	Name string `json:"name"`
	// Nodes is how many nodes it ran.
	Nodes int `json:"nodes"`
	// PeakFiles is the most files it held open, counted every quarter
	// second: its nodes' sockets, logs and locks, and its own.
	PeakFiles int `json:"peak_files"`
}

// PeakFilesPerNode is the most open files per node of a host process: its
// peak over the nodes it ran, the mean of its nodes at that moment.
func (p HostProcess) PeakFilesPerNode() float64 {
	if p.Nodes == 0 {
		return 0
	}
	return float64(p.PeakFiles) / float64(p.Nodes)
}

// HostFiles sums up what the shared host processes of a scenario's runs
// held open.
type HostFiles struct {
	// Runs counts the runs whose nodes ran in host processes; Processes
	// is the most host processes of one run.
	Runs      int `json:"runs"`
	Processes int `json:"processes"`
	// PeakFiles is the most open files of one host process, and
	// PeakFilesPerNode that of one node (HostProcess.PeakFilesPerNode).
	PeakFiles        int     `json:"peak_files"`
	PeakFilesPerNode float64 `json:"peak_files_per_node"`
}

// summarizeHostFiles is the runs' HostFiles, nil when no run's nodes ran
// in host processes.
func summarizeHostFiles(runs []Run) *HostFiles {
	var h HostFiles
	for _, r := range runs {
		if len(r.HostProcesses) == 0 {
			continue
		}
		h.Runs++
		h.Processes = max(h.Processes, len(r.HostProcesses))
		for _, p := range r.HostProcesses {
			h.PeakFiles = max(h.PeakFiles, p.PeakFiles)
			h.PeakFilesPerNode = max(h.PeakFilesPerNode, p.PeakFilesPerNode())
		}
	}
	if h.Runs == 0 {
		return nil
	}
	return &h
}

// hostFilesLine says, under the summary table, how many host processes
// ran a scenario's nodes and the most files they held open.
func hostFilesLine(key string, s Summary) string {
	h := s.HostFiles
	if h == nil {
		return ""
	}
	procs := "1 host process"
	if h.Processes > 1 {
		procs = fmt.Sprintf("up to %d host processes", h.Processes)
	}
	return fmt.Sprintf("%s: nodes ran in %s, which held at most %d open files each, %.0f per node", key, procs, h.PeakFiles, h.PeakFilesPerNode)
}
