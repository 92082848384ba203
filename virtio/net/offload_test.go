package virtionet

import (
	"testing"

	"github.com/govm/govm/tap"
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
		{"csum", csum, tap.OffloadCsum},
		{"tso without csum", tso4 | tso6 | ecn | ufo, 0},
		{"tso4", csum | tso4, tap.OffloadCsum | tap.OffloadTSO4},
		{"tso4+6", csum | tso4 | tso6, tap.OffloadCsum | tap.OffloadTSO4 | tap.OffloadTSO6},
		{"ecn without tso", csum | ecn, tap.OffloadCsum},
		{"ecn", csum | tso6 | ecn, tap.OffloadCsum | tap.OffloadTSO6 | tap.OffloadTSOECN},
		{"ufo", csum | ufo, tap.OffloadCsum | tap.OffloadUFO},
		{"all", ^uint64(0), tap.OffloadCsum | tap.OffloadTSO4 | tap.OffloadTSO6 | tap.OffloadTSOECN | tap.OffloadUFO},
	}
	for _, tt := range tests {
		if got := offloadFlags(tt.feat); got != tt.want {
			t.Errorf("%s: offloadFlags(%#x) = %#x, want %#x", tt.name, tt.feat, got, tt.want)
		}
	}
}
