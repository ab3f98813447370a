// Command paddock-network-policies enforces NetworkPolicies on the local cluster's real node with
// kube-network-policies' controller (nftables rules that send the node's pods' new connections
// to an NFQUEUE, where each is judged against the policies).
//
// It exists because the upstream command names its nftables table and reads its credentials
// one fixed way (the in-cluster service account); the local cluster names everything it creates
// on the host after itself, so that two clusters can run side by side and `down` removes exactly
// what was made, and it has a kubeconfig rather than a service account.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"sigs.k8s.io/kube-network-policies/pkg/networkpolicy"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the cluster")
	nodeName := flag.String("node-name", "", "the node whose pods are fenced")
	table := flag.String("nftables-table", "", "name of the nftables table (inet family)")
	queue := flag.Int("nfqueue-id", 100, "number of the NFQUEUE that packets are judged on")
	klog.InitFlags(nil)
	flag.Parse()
	if *kubeconfig == "" || *nodeName == "" || *table == "" {
		fmt.Fprintln(os.Stderr, "--kubeconfig, --node-name and --nftables-table are required")
		os.Exit(2)
	}
	if err := run(*kubeconfig, networkpolicy.Config{
		QueueID:     *queue,
		NodeName:    *nodeName,
		NFTableName: *table,
		// NRI would tell the controller a pod's address before the API server does; the node's
		// containerd (1.6) has no NRI, so addresses come from the pods' status.
		NRIdisabled:         true,
		NetfilterBug1766Fix: true,
	}); err != nil {
		klog.ErrorS(err, "stopped")
		os.Exit(1)
	}
}

func run(kubeconfig string, config networkpolicy.Config) error {
	restConfig, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return err
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	controller, err := networkpolicy.NewController(
		client,
		factory.Networking().V1().NetworkPolicies(),
		factory.Core().V1().Namespaces(),
		factory.Core().V1().Pods(),
		nil, nil, nil, nil, // no node informer and no AdminNetworkPolicy APIs
		config,
	)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	factory.Start(ctx.Done())
	// Run returns once ctx is done, after deleting its nftables table.
	return controller.Run(ctx)
}
