// istio-helper runs pieces of Istio's own code (the pinned istio.io/istio
// module, scripts/istio/go.mod) that tests/e2e/test_istiod.py needs and that
// no Istio binary exposes without Kubernetes:
//
//	istio-helper bootstrap -id ID -template T -mesh M -out F
//	    writes the Envoy bootstrap Istio's agent generates for a proxy
//	    (pkg/bootstrap), without running the agent;
//	istio-helper istiod -configDir DIR | -kubeDir DIR ...
//	    istiod's server without Kubernetes (istiod.go, kubestore.go);
//	istio-helper agent-wasm -listen unix:PATH -istiod HOST:PORT -cache DIR
//	    istio-agent's Wasm module fetch between Envoy and istiod
//	    (pkg/wasm, as pkg/istio-agent/xds_proxy.go calls it: agentwasm.go);
//	istio-helper translate DIR
//	    prints, as YAML, the TrafficExtension objects Istio's WasmPlugin
//	    translation controller (pilot/pkg/config/kube/extensions) makes of the
//	    WasmPlugins in DIR. istiod registers that controller only beside its
//	    Kubernetes config store, so with --configDir a WasmPlugin file is read
//	    and then ignored (docs/istio.md, "istiod renders what we ship").
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	istiolog "istio.io/istio/pkg/log"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	// Istio's logs go to stdout by default: keep stdout for the output.
	opts := istiolog.DefaultOptions()
	opts.OutputPaths = []string{"stderr"}
	// ISTIO_HELPER_LOG_LEVELS=model:debug,ads:debug: istiod's --log_output_level.
	if levels := os.Getenv("ISTIO_HELPER_LOG_LEVELS"); levels != "" {
		cmd := &cobra.Command{}
		opts.AttachCobraFlags(cmd)
		if err := cmd.PersistentFlags().Set("log_output_level", levels); err != nil {
			fmt.Fprintln(os.Stderr, "istio-helper: ISTIO_HELPER_LOG_LEVELS:", err)
			os.Exit(2)
		}
	}
	if err := istiolog.Configure(opts); err != nil {
		fmt.Fprintln(os.Stderr, "istio-helper: logging:", err)
		os.Exit(1)
	}
	var err error
	switch os.Args[1] {
	case "bootstrap":
		err = bootstrapCmd(os.Args[2:])
	case "translate":
		err = translateCmd(os.Args[2:])
	case "istiod":
		err = istiodCmd(os.Args[2:])
	case "agent-wasm":
		err = agentWasmCmd(os.Args[2:])
	case "version":
		err = versionCmd()
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "istio-helper:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: istio-helper bootstrap|translate|istiod|agent-wasm|version ...")
	os.Exit(2)
}
