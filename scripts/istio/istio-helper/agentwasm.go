package main

// `istio-helper agent-wasm`: the part of istio-agent that fetches Wasm
// modules, run between Envoy and istiod. istio-agent proxies Envoy's xDS
// stream to istiod (pkg/istio-agent/xds_proxy.go) and rewrites every ECDS
// response on the way with pkg/wasm.MaybeConvertWasmExtensionConfig over a
// pkg/wasm.LocalFileCache: a remote module (oci://, https://) is pulled,
// checked against its sha256 and written to the cache, and the resource
// Envoy gets names the local file; when the pull or the check fails, the
// resource becomes Istio's deny-all RBAC filter (allow-all under FAIL_OPEN).
// When the conversion itself fails, the agent NACKs istiod and Envoy gets
// nothing.
//
// This runs those two functions as the agent calls them (same cache options
// from the same environment variables, same NACK), and its metrics as the
// agent's status server exports them (istio_agent_ prefix). What is ours is
// only the relay: a plain gRPC pipe where the agent's is a Unix socket with
// health checks, DNS and SDS beside it, none of which touches a module. The
// agent itself writes its cache to /var/lib/istio/data (a constant), which a
// test must not; -cache names the folder instead.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/anypb"

	"istio.io/istio/pkg/env"
	"istio.io/istio/pkg/model"
	"istio.io/istio/pkg/monitoring"
	"istio.io/istio/pkg/util/sets"
	"istio.io/istio/pkg/wasm"
)

func agentWasmCmd(args []string) error {
	fs := flag.NewFlagSet("agent-wasm", flag.ExitOnError)
	listen := fs.String("listen", "", "where Envoy connects: unix:PATH (the agent's socket, etc/istio/proxy/XDS) or HOST:PORT")
	upstream := fs.String("istiod", "", "istiod's plain-text xDS address, HOST:PORT")
	cacheDir := fs.String("cache", "", "the module cache folder (the agent's is /var/lib/istio/data)")
	metricsAddr := fs.String("metrics", "", "HOST:PORT serving /metrics as the agent's status server does (istio_agent_ prefix)")
	_ = fs.Parse(args)
	if *listen == "" || *upstream == "" || *cacheDir == "" {
		return errors.New("agent-wasm: -listen, -istiod and -cache are required")
	}

	if *metricsAddr != "" {
		// pilot-agent/status.initializeMonitoring: Istio's metrics through
		// its OpenTelemetry exporter, under the istio_agent_ prefix.
		registry := prometheus.NewRegistry()
		wrapped := prometheus.WrapRegistererWithPrefix("istio_agent_", registry)
		wrapped.MustRegister(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		handler, err := monitoring.RegisterPrometheusExporter(wrapped, registry)
		if err != nil {
			return err
		}
		ln, err := net.Listen("tcp", *metricsAddr)
		if err != nil {
			return err
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", handler)
		go func() { _ = http.Serve(ln, mux) }()
	}

	cache := wasm.NewLocalFileCache(*cacheDir, agentWasmOptions())
	defer cache.Cleanup()

	conn, err := grpc.NewClient(*upstream, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()

	network, address := "tcp", *listen
	if path, ok := strings.CutPrefix(*listen, "unix:"); ok {
		network, address = "unix", path
		_ = os.Remove(path)
	}
	ln, err := net.Listen(network, address)
	if err != nil {
		return err
	}
	server := grpc.NewServer()
	discovery.RegisterAggregatedDiscoveryServiceServer(server, &relay{
		upstream: discovery.NewAggregatedDiscoveryServiceClient(conn),
		cache:    cache,
	})
	fmt.Fprintf(os.Stderr, "agent-wasm: relaying %s -> %s, modules cached in %s\n", *listen, *upstream, *cacheDir)
	return server.Serve(ln)
}

// agentWasmOptions: the cache options pilot-agent/options.NewAgentOptions
// builds, from the same variables with the same defaults
// (WASM_INSECURE_REGISTRIES: a comma-separated list of hosts, "*" for all).
func agentWasmOptions() wasm.Options {
	var insecureRegistries []string
	if v := env.Register("WASM_INSECURE_REGISTRIES", "", "").Get(); v != "" {
		insecureRegistries = strings.Split(v, ",")
	}
	return wasm.Options{
		InsecureRegistries:    sets.New(insecureRegistries...),
		ModuleExpiry:          env.Register("WASM_MODULE_EXPIRY", wasm.DefaultModuleExpiry, "").Get(),
		PurgeInterval:         env.Register("WASM_PURGE_INTERVAL", wasm.DefaultPurgeInterval, "").Get(),
		HTTPRequestTimeout:    env.Register("WASM_HTTP_REQUEST_TIMEOUT", wasm.DefaultHTTPRequestTimeout, "").Get(),
		HTTPRequestMaxRetries: env.Register("WASM_HTTP_REQUEST_MAX_RETRIES", wasm.DefaultHTTPRequestMaxRetries, "").Get(),
	}
}

type relay struct {
	discovery.UnimplementedAggregatedDiscoveryServiceServer
	upstream discovery.AggregatedDiscoveryServiceClient
	cache    wasm.Cache
}

// pipe copies requests from Envoy to istiod, and hands each response to
// answer, which sends it on or NACKs it. send guards the upstream stream,
// written by both directions.
type pipe[Req any] struct {
	mu   sync.Mutex
	send func(Req) error
}

func (p *pipe[Req]) up(r Req) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.send(r)
}

func (r *relay) StreamAggregatedResources(down discovery.AggregatedDiscoveryService_StreamAggregatedResourcesServer) error {
	ctx, cancel := context.WithCancel(down.Context())
	defer cancel()
	up, err := r.upstream.StreamAggregatedResources(ctx)
	if err != nil {
		return err
	}
	p := &pipe[*discovery.DiscoveryRequest]{send: up.Send}
	errs := make(chan error, 2)
	go func() { errs <- forward(down.Recv, p.up) }()
	go func() {
		lastAck := ""
		errs <- forward(up.Recv, func(resp *discovery.DiscoveryResponse) error {
			if resp.TypeUrl != model.ExtensionConfigurationType {
				return down.Send(resp)
			}
			// xds_proxy.go, rewriteAndForward.
			if err := wasm.MaybeConvertWasmExtensionConfig(resp.Resources, r.cache); err != nil {
				return p.up(&discovery.DiscoveryRequest{
					VersionInfo: lastAck, TypeUrl: resp.TypeUrl, ResponseNonce: resp.Nonce,
					ErrorDetail: &status.Status{Code: int32(codes.Internal), Message: err.Error()},
				})
			}
			lastAck = resp.VersionInfo
			return down.Send(resp)
		})
	}()
	return <-errs
}

func (r *relay) DeltaAggregatedResources(down discovery.AggregatedDiscoveryService_DeltaAggregatedResourcesServer) error {
	ctx, cancel := context.WithCancel(down.Context())
	defer cancel()
	up, err := r.upstream.DeltaAggregatedResources(ctx)
	if err != nil {
		return err
	}
	p := &pipe[*discovery.DeltaDiscoveryRequest]{send: up.Send}
	errs := make(chan error, 2)
	go func() { errs <- forward(down.Recv, p.up) }()
	go func() {
		errs <- forward(up.Recv, func(resp *discovery.DeltaDiscoveryResponse) error {
			if resp.TypeUrl != model.ExtensionConfigurationType {
				return down.Send(resp)
			}
			// xds_proxy_delta.go, deltaRewriteAndForward.
			resources := make([]*anypb.Any, 0, len(resp.Resources))
			for _, res := range resp.Resources {
				resources = append(resources, res.Resource)
			}
			if err := wasm.MaybeConvertWasmExtensionConfig(resources, r.cache); err != nil {
				return p.up(&discovery.DeltaDiscoveryRequest{
					TypeUrl: resp.TypeUrl, ResponseNonce: resp.Nonce,
					ErrorDetail: &status.Status{Code: int32(codes.Internal), Message: err.Error()},
				})
			}
			for i := range resources {
				resp.Resources[i].Resource = resources[i]
			}
			return down.Send(resp)
		})
	}()
	return <-errs
}

// forward sends each message recv gives until the stream ends (io.EOF is
// a clean end).
func forward[M any](recv func() (M, error), send func(M) error) error {
	for {
		m, err := recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := send(m); err != nil {
			return err
		}
	}
}
