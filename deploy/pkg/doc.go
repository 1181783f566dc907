// Package pkg holds no code: its test builds the Debian package
// (scripts/build-deb.sh), installs it with apt-get into a fresh Debian 12
// root (scripts/deb-test-root.sh) so that its dependencies resolve from
// Debian's archive, and checks what an operator gets: the files and
// where they are, the examples accepted by check-config, the unit
// accepted by systemd-analyze, and the daemon running on the embedded
// default with only the packages it depends on.
package pkg
