package networkpolicy

// Added by Paddock's build of the local cluster (hack/k8s-binaries.sh): the controller's rules
// send packets to the queue with the x_tables NFQUEUE target rather than nftables' own queue
// statement, which kernels built without CONFIG_NFT_QUEUE (this project's CI machine, for one)
// refuse. The target needs only CONFIG_NETFILTER_XT_TARGET_NFQUEUE and nft_compat, which every
// kernel that runs iptables-nft has; the packets reach the same queue either way.

import (
	"encoding/binary"

	"github.com/google/nftables/expr"
	"github.com/google/nftables/xt"
)

const (
	xtNFQueueRevision = 3    // struct xt_NFQ_info_v3
	xtNFQueueBypass   = 0x01 // NFQ_FLAG_BYPASS: accept when no program listens
)

func xtQueue(queueID int, failOpen bool) expr.Any {
	info := make([]byte, 6) // queuenum, queues_total, flags: three host-order u16
	binary.NativeEndian.PutUint16(info[0:], uint16(queueID))
	binary.NativeEndian.PutUint16(info[2:], 1)
	if failOpen {
		binary.NativeEndian.PutUint16(info[4:], xtNFQueueBypass)
	}
	target := xt.Unknown(info)
	return &expr.Target{Name: "NFQUEUE", Rev: xtNFQueueRevision, Info: &target}
}
