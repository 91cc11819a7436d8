package main

// Istio's WasmPlugin → TrafficExtension translation, run on a folder: the
// same file config store istiod builds for --configDir
// (pilot/pkg/config/kube/file), with the translation controller istiod puts
// beside its Kubernetes store (pilot/pkg/config/kube/extensions) on top.
// Prints every TrafficExtension it makes, as YAML (pilot/pkg/config/kube/crd
// ConvertConfig), in a stable order.

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"time"

	"sigs.k8s.io/yaml"

	"istio.io/istio/pilot/pkg/config/kube/crd"
	"istio.io/istio/pilot/pkg/config/kube/extensions"
	"istio.io/istio/pilot/pkg/config/kube/file"
	"istio.io/istio/pilot/pkg/serviceregistry/kube/controller"
	"istio.io/istio/pkg/config/schema/collections"
	"istio.io/istio/pkg/config/schema/gvk"
)

func translateCmd(args []string) error {
	if len(args) != 1 {
		return errors.New("translate: one folder expected")
	}
	stop := make(chan struct{})
	defer close(stop)
	store, err := file.NewController(args[0], "cluster.local", collections.Pilot, controller.Options{})
	if err != nil {
		return err
	}
	go store.Run(stop)
	ext := extensions.NewController(store, nil, nil)
	go ext.Run(stop)
	deadline := time.Now().Add(20 * time.Second)
	for !store.HasSynced() || !ext.HasSynced() {
		if time.Now().After(deadline) {
			return errors.New("translate: the stores did not sync in 20 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(store.List(gvk.WasmPlugin, "")) == 0 {
		return fmt.Errorf("translate: no WasmPlugin in %s", args[0])
	}
	configs := ext.List(gvk.TrafficExtension, "")
	sort.Slice(configs, func(i, j int) bool {
		return configs[i].Namespace+"/"+configs[i].Name < configs[j].Namespace+"/"+configs[j].Name
	})
	for _, c := range configs {
		obj, err := crd.ConvertConfig(c)
		if err != nil {
			return err
		}
		b, err := yaml.Marshal(obj)
		if err != nil {
			return err
		}
		fmt.Fprintf(os.Stdout, "---\n%s", b)
	}
	return nil
}
