package main

// `istio-helper istiod`: istiod (pilot/pkg/bootstrap, the code
// pilot-discovery runs) for a machine without Kubernetes, reading its
// configuration from a folder: -configDir (its --configDir file store) or
// -kubeDir (its Kubernetes config store, kept equal to the folder:
// kubestore.go).
//
// pilot-discovery itself cannot start there at this Istio version:
// with --configDir and --registries "" (any other value than Kubernetes is
// refused), NewServer builds no Kubernetes client, hence no multicluster
// controller, and the ServiceEntry controller dereferences it
// (serviceentry.newController: multiclusterController.ConfigCluster()):
// SIGSEGV at start. So this runs the same bootstrap.NewServer with the flags
// it needs here, and hands it Istio's own in-memory Kubernetes client
// (pkg/kube.NewFakeClient, the one Istio's tests use) where the real one
// would be. With -configDir nothing is read from it but (empty) namespace
// and secret informers; with -kubeDir it holds the folder's objects.
// Everything else (config stores, push context, listeners, ECDS) is
// istiod's code unchanged.

import (
	"flag"
	"fmt"
	"reflect"
	"time"
	"unsafe"

	"istio.io/istio/pilot/pkg/bootstrap"
	"istio.io/istio/pkg/cmd"
	"istio.io/istio/pkg/ctrlz"
	kubelib "istio.io/istio/pkg/kube"
)

func istiodCmd(args []string) error {
	fs := flag.NewFlagSet("istiod", flag.ExitOnError)
	configDir := fs.String("configDir", "", "the folder of Istio resources (pilot-discovery --configDir)")
	kubeDir := fs.String("kubeDir", "", "the folder of resources to keep applied to the in-memory Kubernetes client, "+
		"read by istiod's Kubernetes config store (instead of -configDir)")
	meshConfig := fs.String("meshConfig", "", "the mesh config file")
	networks := fs.String("networksConfig", "", "the mesh networks file (may be absent)")
	httpAddr := fs.String("httpAddr", "127.0.0.1:8080", "debug and readiness HTTP address")
	grpcAddr := fs.String("grpcAddr", "127.0.0.1:15010", "plain-text xDS address")
	monitoringAddr := fs.String("monitoringAddr", "127.0.0.1:15014", "metrics address")
	ctrlzPort := fs.Uint("ctrlz_port", 9876, "ctrlz port (on 127.0.0.1)")
	domain := fs.String("domain", "cluster.local", "DNS domain suffix")
	shutdown := fs.Duration("shutdownDuration", time.Second, "shutdown duration")
	_ = fs.Parse(args)
	if (*configDir == "") == (*kubeDir == "") || *meshConfig == "" {
		return fmt.Errorf("istiod: -meshConfig and one of -configDir, -kubeDir are required")
	}

	// As pilot-discovery's addFlags and flag defaults make them.
	serverArgs := bootstrap.NewPilotArgs(func(p *bootstrap.PilotArgs) {
		p.CtrlZOptions = ctrlz.DefaultOptions()
		p.InjectionOptions = bootstrap.InjectionOptions{InjectionDirectory: "./var/lib/istio/inject"}
	})
	serverArgs.CtrlZOptions.Port = uint16(*ctrlzPort)
	serverArgs.CtrlZOptions.Address = "127.0.0.1"
	serverArgs.RegistryOptions.Registries = nil
	serverArgs.RegistryOptions.FileDir = *configDir
	serverArgs.RegistryOptions.KubeOptions.DomainSuffix = *domain
	serverArgs.RegistryOptions.KubeOptions.ClusterID = "Kubernetes"
	serverArgs.RegistryOptions.KubeOptions.KubernetesAPIQPS = 80
	serverArgs.RegistryOptions.KubeOptions.KubernetesAPIBurst = 160
	serverArgs.MeshConfigFile = *meshConfig
	serverArgs.NetworksConfigFile = *networks
	serverArgs.ShutdownDuration = *shutdown
	serverArgs.ServerOptions.HTTPAddr = *httpAddr
	serverArgs.ServerOptions.GRPCAddr = *grpcAddr
	serverArgs.ServerOptions.MonitoringAddr = *monitoringAddr
	serverArgs.ServerOptions.SecureGRPCAddr = "" // no TLS xDS: no CA here
	serverArgs.ServerOptions.HTTPSAddr = ""      // no webhooks
	serverArgs.ServerOptions.TLSOptions.TLSMinVersion = bootstrap.TLSMinVersion1_2
	if err := serverArgs.Complete(); err != nil {
		return err
	}

	stop := make(chan struct{})
	fake := kubelib.NewFakeClient()
	var store *kubeStore
	if *kubeDir != "" {
		var err error
		if store, err = newKubeStore(fake, *kubeDir); err != nil {
			return fmt.Errorf("istiod: %w", err)
		}
	}
	s, err := bootstrap.NewServer(serverArgs, func(s *bootstrap.Server) {
		// Server.kubeClient is unexported; NewServer's initKubeClient keeps a
		// client that is already set ("Already initialized by startup
		// arguments").
		f := reflect.ValueOf(s).Elem().FieldByName("kubeClient")
		reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem().Set(reflect.ValueOf(fake))
	})
	if err != nil {
		return fmt.Errorf("istiod: %w", err)
	}
	if err := s.Start(stop); err != nil {
		return fmt.Errorf("istiod: start: %w", err)
	}
	if store != nil {
		go store.run(stop)
	}
	cmd.WaitSignal(stop)
	s.WaitUntilCompletion()
	return nil
}
