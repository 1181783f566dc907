// Package container holds no code: the directory carries the cephdpdkd
// container image (Containerfile, and packages.txt, the Debian packages
// it installs) and the manifests that deploy it to a fleet: a cephadm
// custom-container service spec (cephadm.yaml) and a Kubernetes
// DaemonSet with its ConfigMap (kubernetes.yaml).
// docs/operator/containers.md says how to use them.
//
// Its Go test checks the manifests statically (the fields a node daemon
// needs, the configurations they carry through the daemon's own
// validation, the cephadm spec through Ceph's own ServiceSpec), and
// builds the image with podman on a base scripts/container-base-image.sh
// makes from Debian's archive and caches, then runs in it check-config,
// the manifests' restore-nic command and the daemon on its embedded
// default configuration until SIGTERM.
package container
