// A ConfigMap labeller on controller-runtime, written for bench/run.ts --peers (bench/README.md,
// "Peers"): the ConfigMap watch with builder.OnlyMetadata (a metadata-only informer; the cache
// keeps managedFields, as controller-runtime does unless told otherwise), MaxConcurrentReconciles
// workers, and a forced server-side apply (client.Client.Apply) of one label under its own field
// manager wherever the cached object lacks it. No metrics or health servers, no leader election.
// Logs one line once its cache is synced, nothing per object.
//
//	KUBECONFIG=… labeller-peer-controller-runtime --namespace NS|--all-namespaces --label K=V \
//	  --field-manager NAME --concurrency N
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

type labeller struct {
	client.Client
	key, value, fieldManager string
}

func configMapMetadata() *metav1.PartialObjectMetadata {
	object := &metav1.PartialObjectMetadata{}
	object.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	return object
}

func (l *labeller) Reconcile(ctx context.Context, request ctrl.Request) (ctrl.Result, error) {
	object := configMapMetadata()
	if err := l.Get(ctx, request.NamespacedName, object); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if value, ok := object.GetLabels()[l.key]; ok && value == l.value {
		return ctrl.Result{}, nil
	}
	apply := corev1ac.ConfigMap(request.Name, request.Namespace).WithLabels(map[string]string{l.key: l.value})
	return ctrl.Result{}, l.Apply(ctx, apply, client.FieldOwner(l.fieldManager), client.ForceOwnership)
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "labeller-peer-controller-runtime: "+format+"\n", args...)
	os.Exit(2)
}

func main() {
	namespace := flag.String("namespace", "", "the namespace watched")
	all := flag.Bool("all-namespaces", false, "watch every namespace")
	label := flag.String("label", "", "the label applied, K=V")
	fieldManager := flag.String("field-manager", "", "the field manager of the apply")
	concurrency := flag.Int("concurrency", 0, "reconciles in flight")
	flag.Parse()
	if (*namespace == "") != *all {
		fail("give one of --namespace NS and --all-namespaces")
	}
	key, value, ok := strings.Cut(*label, "=")
	if !ok || *fieldManager == "" || *concurrency < 1 {
		fail("--label K=V, --field-manager and --concurrency N are required")
	}
	// Without a logger controller-runtime complains once; its own lines are not per object.
	ctrl.SetLogger(logr.Discard())

	options := ctrl.Options{
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		LeaderElection:         false,
	}
	if *namespace != "" {
		options.Cache = cache.Options{DefaultNamespaces: map[string]cache.Config{*namespace: {}}}
	}
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), options)
	if err != nil {
		fail("manager: %v", err)
	}
	err = ctrl.NewControllerManagedBy(mgr).
		Named("labeller").
		For(configMapMetadata(), builder.OnlyMetadata).
		WithOptions(controller.Options{MaxConcurrentReconciles: *concurrency}).
		Complete(&labeller{Client: mgr.GetClient(), key: key, value: value, fieldManager: *fieldManager})
	if err != nil {
		fail("controller: %v", err)
	}
	err = mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		// GetInformer blocks until the informer's first list is in the cache.
		if _, err := mgr.GetCache().GetInformer(ctx, configMapMetadata()); err != nil {
			return err
		}
		cached := &metav1.PartialObjectMetadataList{}
		cached.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMapList"))
		if err := mgr.GetCache().List(ctx, cached); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "synced: %d objects cached\n", len(cached.Items))
		return nil
	}))
	if err != nil {
		fail("runnable: %v", err)
	}
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		fmt.Fprintf(os.Stderr, "labeller-peer-controller-runtime: %v\n", err)
		os.Exit(1)
	}
}
