package main

// The bootstrap Istio's agent writes, by Istio's code: the proxy config is
// built as pilot-agent builds it (pilot/cmd/pilot-agent/config.
// ConstructProxyConfig: the mesh config file, then the PROXY_CONFIG
// environment variable, which is what the proxy.istio.io/config annotation
// becomes), the node metadata by bootstrap.GetNodeMetaData from the
// ISTIO_META_* / ISTIO_METAJSON_* environment (pilot-agent passes
// os.Environ()), and the file by bootstrap.New(...).WriteTo with Istio's
// envoy_bootstrap.json template. Nothing is changed afterwards here; the
// test edits one thing (the xds-grpc cluster's address: the agent's Unix
// socket becomes istiod's plain-text gRPC port, as no agent runs).

import (
	"errors"
	"flag"
	"fmt"
	"os"

	agentconfig "istio.io/istio/pilot/cmd/pilot-agent/config"
	"istio.io/istio/pkg/bootstrap"
	"istio.io/istio/pkg/bootstrap/platform"
	"istio.io/istio/pkg/version"
)

func bootstrapCmd(args []string) error {
	fs := flag.NewFlagSet("bootstrap", flag.ExitOnError)
	id := fs.String("id", "", "the proxy's node id, e.g. router~127.0.0.1~gw-0.istio-system~istio-system.svc.cluster.local")
	template := fs.String("template", "", "Istio's tools/packaging/common/envoy_bootstrap.json")
	meshFile := fs.String("mesh", "", "the mesh config file (what pilot-agent reads at /etc/istio/config/mesh)")
	out := fs.String("out", "", "where to write the bootstrap")
	ip := fs.String("ip", "127.0.0.1", "the proxy's instance IP")
	prometheusPort := fs.Int("prometheus-port", 15090, "EnvoyPrometheusPort (pilot-agent's default: 15090)")
	statusPort := fs.Int("envoy-status-port", 15021, "EnvoyStatusPort (pilot-agent's default: 15021)")
	_ = fs.Parse(args)
	if *id == "" || *template == "" || *out == "" {
		return errors.New("bootstrap: -id, -template and -out are required")
	}
	// "istio-proxy" is pilot-agent's default --serviceCluster.
	pc, err := agentconfig.ConstructProxyConfig(*meshFile, "istio-proxy", os.Getenv("PROXY_CONFIG"), 0)
	if err != nil {
		return fmt.Errorf("proxy config: %w", err)
	}
	node, err := bootstrap.GetNodeMetaData(bootstrap.MetadataOptions{
		ID:                  *id,
		Envs:                os.Environ(),
		Platform:            &platform.Unknown{},
		InstanceIPs:         []string{*ip},
		ProxyConfig:         pc,
		EnvoyPrometheusPort: *prometheusPort,
		EnvoyStatusPort:     *statusPort,
	})
	if err != nil {
		return fmt.Errorf("node metadata: %w", err)
	}
	f, err := os.Create(*out)
	if err != nil {
		return err
	}
	if err := bootstrap.New(bootstrap.Config{Node: node}).WriteTo(*template, f); err != nil {
		_ = f.Close()
		return fmt.Errorf("bootstrap: %w", err)
	}
	return f.Close()
}

func versionCmd() error {
	fmt.Println(version.Info.LongForm())
	return nil
}
