// Package capture records every testbed run as a pcapng file (frames from the
// switch, fault records beside them) and dissects such files into elections.
package capture
