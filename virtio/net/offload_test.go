package virtionet

import (
	"testing"

	"golang.org/x/sys/unix"
)

func TestOffloadFlags(t *testing.T) {
	var (
		csum = feat(FeatureGuestCsum)
		tso4 = feat(FeatureGuestTSO4)
		tso6 = feat(FeatureGuestTSO6)
		ecn  = feat(FeatureGuestECN)
		ufo  = feat(FeatureGuestUFO)
		// Host (device-side) offloads must not leak into the flags:
		// they concern frames the guest sends, not ones it receives.
		host = feat(FeatureCsum, FeatureHostTSO4)
	)
	tests := []struct {
		name string
		feat uint64
		want uint
	}{
		{"none", 0, 0},
		{"host offloads only", host, 0},
		{"csum", csum, unix.TUN_F_CSUM},
		{"tso without csum", tso4 | tso6 | ecn | ufo, 0},
		{"tso4", csum | tso4, unix.TUN_F_CSUM | unix.TUN_F_TSO4},
		{"tso4+6", csum | tso4 | tso6, unix.TUN_F_CSUM | unix.TUN_F_TSO4 | unix.TUN_F_TSO6},
		{"ecn without tso", csum | ecn, unix.TUN_F_CSUM},
		{"ecn", csum | tso6 | ecn, unix.TUN_F_CSUM | unix.TUN_F_TSO6 | unix.TUN_F_TSO_ECN},
		{"ufo", csum | ufo, unix.TUN_F_CSUM | unix.TUN_F_UFO},
		{"all", ^uint64(0), unix.TUN_F_CSUM | unix.TUN_F_TSO4 | unix.TUN_F_TSO6 | unix.TUN_F_TSO_ECN | unix.TUN_F_UFO},
	}
	for _, tt := range tests {
		if got := offloadFlags(tt.feat); got != tt.want {
			t.Errorf("%s: offloadFlags(%#x) = %#x, want %#x", tt.name, tt.feat, got, tt.want)
		}
	}
}
