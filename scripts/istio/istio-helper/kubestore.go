package main

// `istio-helper istiod -kubeDir DIR`: istiod reads its configuration from its
// Kubernetes config store (the path it takes on a cluster: the WasmPlugin
// translation and the Gateway API controller run there), backed by Istio's
// in-memory Kubernetes client. What stands in for the API server is this
// file's loop: it keeps the client's object trackers equal to the YAML files
// of DIR (created, updated; a removed file's objects are deleted), as
// `kubectl apply` would, and registers the CRDs of every Istio and Gateway
// API kind istiod watches, as `istioctl install` would.

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubeyaml "k8s.io/apimachinery/pkg/util/yaml"
	metadatafake "k8s.io/client-go/metadata/fake"
	clienttesting "k8s.io/client-go/testing"

	"istio.io/istio/pkg/config"
	"istio.io/istio/pkg/config/schema/collections"
	"istio.io/istio/pkg/config/schema/gvk"
	"istio.io/istio/pkg/config/schema/gvr"
	kubelib "istio.io/istio/pkg/kube"
)

type tracked interface {
	Tracker() clienttesting.ObjectTracker
}

type objKey struct {
	gvr       schema.GroupVersionResource
	namespace string
	name      string
}

type kubeStore struct {
	client  kubelib.CLIClient
	dir     string
	applied map[objKey][32]byte
}

func newKubeStore(client kubelib.CLIClient, dir string) (*kubeStore, error) {
	k := &kubeStore{client: client, dir: dir, applied: map[objKey][32]byte{}}
	if err := k.makeCRDs(); err != nil {
		return nil, err
	}
	return k, k.sync()
}

// makeCRDs: the CRD objects istiod's CRD watcher waits for (it reads their
// metadata only; this is what Istio's own clienttest.MakeCRD does).
func (k *kubeStore) makeCRDs() error {
	fmc, ok := k.client.Metadata().(*metadatafake.FakeMetadataClient)
	if !ok {
		return fmt.Errorf("not a fake metadata client")
	}
	fmd := fmc.Resource(gvr.CustomResourceDefinition).(metadatafake.MetadataClient)
	for _, s := range collections.PilotGatewayAPI().All() {
		if s.IsBuiltin() {
			continue
		}
		r := s.GroupVersionResource()
		obj := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: r.Resource + "." + r.Group}}
		if _, err := fmd.CreateFake(obj, metav1.CreateOptions{}); err != nil && !strings.Contains(err.Error(), "already exists") {
			return err
		}
	}
	return nil
}

func (k *kubeStore) trackerFor(group string) clienttesting.ObjectTracker {
	var c any
	switch {
	case group == "":
		c = k.client.Kube()
	case strings.HasSuffix(group, ".istio.io"):
		c = k.client.Istio()
	case group == "gateway.networking.k8s.io":
		c = k.client.GatewayAPI()
	default:
		return nil
	}
	t, ok := c.(tracked)
	if !ok {
		return nil
	}
	return t.Tracker()
}

// sync applies DIR's files: every document of a kind istiod knows is
// created or updated in its client's tracker when its bytes changed; objects
// no longer in DIR are deleted. Other kinds (a ConfigMap the chart renders
// is one) are applied too when they belong to a known client, else skipped.
func (k *kubeStore) sync() error {
	files, err := filepath.Glob(filepath.Join(k.dir, "*.yaml"))
	if err != nil {
		return err
	}
	sort.Strings(files)
	seen := map[objKey]bool{}
	decoder := kubelib.IstioCodec.UniversalDeserializer()
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		reader := kubeyaml.NewYAMLReader(bufioReader(data))
		for {
			doc, err := reader.Read()
			if err != nil {
				break // io.EOF, or a torn write: the next round reads it again
			}
			if len(bytes.TrimSpace(doc)) == 0 || isComments(doc) {
				continue
			}
			obj, gk, err := decoder.Decode(doc, nil, nil)
			if err != nil {
				return fmt.Errorf("%s: %w", f, err)
			}
			if err := k.apply(obj, *gk, doc, seen); err != nil {
				return fmt.Errorf("%s: %w", f, err)
			}
		}
	}
	for key := range k.applied {
		if !seen[key] {
			if t := k.trackerFor(key.gvr.Group); t != nil {
				_ = t.Delete(key.gvr, key.namespace, key.name)
			}
			delete(k.applied, key)
		}
	}
	return nil
}

func (k *kubeStore) apply(obj runtime.Object, gk schema.GroupVersionKind, doc []byte, seen map[objKey]bool) error {
	r, ok := gvk.ToGVR(config.GroupVersionKind{Group: gk.Group, Version: gk.Version, Kind: gk.Kind})
	if !ok {
		return nil
	}
	t := k.trackerFor(gk.Group)
	if t == nil {
		return nil
	}
	m, ok := obj.(metav1.Object)
	if !ok {
		return nil
	}
	key := objKey{gvr: r, namespace: m.GetNamespace(), name: m.GetName()}
	seen[key] = true
	sum := sha256.Sum256(doc)
	if old, found := k.applied[key]; found && old == sum {
		return nil
	}
	m.SetGeneration(time.Now().UnixNano())
	m.SetResourceVersion(fmt.Sprint(time.Now().UnixNano()))
	var err error
	if _, found := k.applied[key]; found {
		err = t.Update(r, obj, key.namespace)
	} else {
		err = t.Create(r, obj, key.namespace)
	}
	if err != nil {
		return err
	}
	k.applied[key] = sum
	return nil
}

func (k *kubeStore) run(stop <-chan struct{}) {
	ticker := time.NewTicker(100 * time.Millisecond)
	defer ticker.Stop()
	for {
		select {
		case <-stop:
			return
		case <-ticker.C:
			if err := k.sync(); err != nil {
				fmt.Fprintln(os.Stderr, "istio-helper: kube store:", err)
			}
		}
	}
}

func isComments(doc []byte) bool {
	for _, line := range strings.Split(string(doc), "\n") {
		l := strings.TrimSpace(line)
		if l != "" && !strings.HasPrefix(l, "#") {
			return false
		}
	}
	return true
}

func bufioReader(data []byte) *bufio.Reader { return bufio.NewReader(bytes.NewReader(data)) }
