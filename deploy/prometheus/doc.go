// Package prometheus holds no code: the directory carries cephdpdkd's
// Prometheus scrape configuration (prometheus.yml), alert rules
// (cephdpdkd.rules.yml) and their promtool unit tests
// (cephdpdkd.rules_test.yml). Its Go test checks them with promtool, checks
// that every metric they and the Grafana dashboard (deploy/grafana) name is
// one the daemon exports, and runs a real Prometheus against a running
// daemon to evaluate every rule and dashboard query.
package prometheus
