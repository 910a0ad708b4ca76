// Package deploy holds no code: its tests check the files beside them
// that run cellserver as a service (systemd/, docker/, kubernetes/,
// grafana/, prometheus/, cellserver.conf).
//
// It is a module of its own so that what only these tests need (the
// Kubernetes API types, to read the manifests strictly) stays out of
// cellserver's module; .ci/run runs its tests with cd deploy && go test
// ./... after cellserver's own.
package deploy
