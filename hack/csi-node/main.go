// Command paddock-csi-node is the node side of the local cluster's CSI driver on its real
// node. It registers with the kubelet through the plugin-registration socket, and mounts a
// volume for a pod by bind-mounting the volume's directory (its handle, under --root) onto the
// pod's target path. Provisioning, snapshots and restores are done by the local cluster's
// kwok-agent through the Kubernetes API, as a CSI controller's sidecars would.
package main

import (
	"context"
	"errors"
	"flag"
	"log"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	registration "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

type plugin struct {
	csi.UnimplementedIdentityServer
	csi.UnimplementedNodeServer
	registration.UnimplementedRegistrationServer
	driver, node, root, endpoint string
}

func (p *plugin) GetInfo(context.Context, *registration.InfoRequest) (*registration.PluginInfo, error) {
	return &registration.PluginInfo{
		Type: registration.CSIPlugin, Name: p.driver, Endpoint: p.endpoint,
		SupportedVersions: []string{"1.0.0"},
	}, nil
}

func (p *plugin) NotifyRegistrationStatus(_ context.Context, s *registration.RegistrationStatus) (*registration.RegistrationStatusResponse, error) {
	if !s.PluginRegistered {
		log.Fatalf("the kubelet refused the plugin: %s", s.Error)
	}
	log.Printf("registered with the kubelet as %s", p.driver)
	return &registration.RegistrationStatusResponse{}, nil
}

func (p *plugin) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: p.driver, VendorVersion: "1"}, nil
}

func (p *plugin) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	return &csi.GetPluginCapabilitiesResponse{}, nil
}

func (p *plugin) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	return &csi.ProbeResponse{}, nil
}

func (p *plugin) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	return &csi.NodeGetInfoResponse{NodeId: p.node}, nil
}

func (p *plugin) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	return &csi.NodeGetCapabilitiesResponse{}, nil // no staging: publish is the whole mount
}

// NodePublishVolume bind-mounts the volume's directory onto the target path (once).
func (p *plugin) NodePublishVolume(_ context.Context, req *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	source, target := filepath.Clean(req.GetVolumeId()), req.GetTargetPath()
	if !strings.HasPrefix(source, p.root+string(filepath.Separator)) || target == "" {
		return nil, status.Errorf(codes.InvalidArgument, "volume %q is not under %s", source, p.root)
	}
	if _, err := os.Stat(source); err != nil {
		return nil, status.Errorf(codes.NotFound, "volume directory: %v", err)
	}
	if err := os.MkdirAll(target, 0o750); err != nil {
		return nil, status.Errorf(codes.Internal, "target: %v", err)
	}
	if mounted(target) {
		return &csi.NodePublishVolumeResponse{}, nil
	}
	if err := unix.Mount(source, target, "", unix.MS_BIND, ""); err != nil {
		return nil, status.Errorf(codes.Internal, "bind mount %s on %s: %v", source, target, err)
	}
	if req.GetReadonly() {
		flags := uintptr(unix.MS_BIND | unix.MS_REMOUNT | unix.MS_RDONLY)
		if err := unix.Mount("", target, "", flags, ""); err != nil {
			_ = unix.Unmount(target, 0)
			return nil, status.Errorf(codes.Internal, "read-only remount of %s: %v", target, err)
		}
	}
	return &csi.NodePublishVolumeResponse{}, nil
}

func (p *plugin) NodeUnpublishVolume(_ context.Context, req *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	target := req.GetTargetPath()
	if mounted(target) {
		if err := unix.Unmount(target, 0); err != nil {
			return nil, status.Errorf(codes.Internal, "unmount %s: %v", target, err)
		}
	}
	if err := os.Remove(target); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, status.Errorf(codes.Internal, "remove %s: %v", target, err)
	}
	return &csi.NodeUnpublishVolumeResponse{}, nil
}

// mounted says whether path is a mount point of this mount namespace.
func mounted(path string) bool {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	clean := filepath.Clean(path)
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) > 4 && fields[4] == clean {
			return true
		}
	}
	return false
}

func serve(path string, register func(*grpc.Server)) {
	_ = os.Remove(path)
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		log.Fatal(err)
	}
	listener, err := net.Listen("unix", path)
	if err != nil {
		log.Fatal(err)
	}
	server := grpc.NewServer()
	register(server)
	go func() { log.Fatal(server.Serve(listener)) }()
}

func main() {
	p := &plugin{}
	var registrationSocket string
	flag.StringVar(&p.driver, "driver-name", "", "the CSI driver's name")
	flag.StringVar(&p.node, "node-id", "", "the node's name")
	flag.StringVar(&p.root, "root", "", "the directory the volumes' directories are under")
	flag.StringVar(&p.endpoint, "csi-socket", "", "the CSI endpoint's socket path")
	flag.StringVar(&registrationSocket, "registration-socket", "", "the socket in the kubelet's plugins_registry")
	flag.Parse()
	if p.driver == "" || p.node == "" || p.root == "" || p.endpoint == "" || registrationSocket == "" {
		log.Fatal("--driver-name, --node-id, --root, --csi-socket and --registration-socket are required")
	}
	p.root = filepath.Clean(p.root)
	serve(p.endpoint, func(s *grpc.Server) {
		csi.RegisterIdentityServer(s, p)
		csi.RegisterNodeServer(s, p)
	})
	serve(registrationSocket, func(s *grpc.Server) { registration.RegisterRegistrationServer(s, p) })
	log.Printf("serving %s for node %s", p.driver, p.node)
	select {}
}
