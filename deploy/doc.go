// Package deploy holds no code: the directory carries what an operator
// installs (deploy/README.md): the systemd unit cephdpdkd@.service, and
// in prometheus/ and grafana/ the monitoring. Its Go test checks the
// unit with systemd-analyze, checks that it agrees with the daemon (the
// state directory, the commands it runs) and runs its ExecStartPre and
// ExecStopPost command lines with the real binary.
package deploy
