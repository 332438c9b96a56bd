package fabric

import (
	"fmt"
	"strconv"
)

// QoS is a partition's quality of service as UFM's pkeys API sets it: the
// IPoIB broadcast group's MTU and rate, and the service level, MTU and rate
// limit of the partition's paths. Its fields are UFM's units; MTUCode and
// RateCode give the IBTA codes OpenSM's files take.
type QoS struct {
	// MTULimit is UFM's mtu_limit, in KB: 2 or 4.
	MTULimit int
	// ServiceLevel is UFM's service_level: 0 to 15.
	ServiceLevel int
	// RateMbps is UFM's rate_limit in Mb/s (UFM sends Gb/s, 2.5 among them):
	// one of the rates of RateLimits.
	RateMbps int
}

// DefaultQoS is what UFM gives a new pkey: mtu_limit 2, service_level 0,
// rate_limit 2.5.
var DefaultQoS = QoS{MTULimit: 2, ServiceLevel: 0, RateMbps: 2500}

// RateLimits are UFM's rate_limit values in Mb/s, in the order of their IBTA
// rate codes from 2 (2.5 Gb/s) to 18 (300 Gb/s).
var RateLimits = []int{2500, 10000, 30000, 5000, 20000, 40000, 60000, 80000, 120000, 14000, 56000, 112000, 168000,
	25000, 100000, 200000, 300000}

// firstRateCode is the IBTA code of RateLimits[0].
const firstRateCode = 2

// Check refuses a QoS that UFM's API would not take, naming the field.
func (q QoS) Check() error {
	switch {
	case q.MTULimit != 2 && q.MTULimit != 4:
		return fmt.Errorf("mtu_limit %d: want 2 or 4 (KB)", q.MTULimit)
	case q.ServiceLevel < 0 || q.ServiceLevel > 15:
		return fmt.Errorf("service_level %d: want 0 to 15", q.ServiceLevel)
	case q.RateCode() == 0:
		return fmt.Errorf("rate_limit %s: want one of %s (Gb/s)", FormatRate(q.RateMbps), RateLimitList())
	}
	return nil
}

// MTUCode is the IBTA MTU code of MTULimit: 4 (2048 bytes) for 2, 5 (4096)
// for 4; 0 for any other.
func (q QoS) MTUCode() int {
	switch q.MTULimit {
	case 2:
		return 4
	case 4:
		return 5
	}
	return 0
}

// RateCode is the IBTA rate code of RateMbps; 0 for a rate UFM does not
// list.
func (q QoS) RateCode() int {
	for i, r := range RateLimits {
		if r == q.RateMbps {
			return firstRateCode + i
		}
	}
	return 0
}

// RateGbps is RateMbps as UFM writes rate_limit: 2.5, 10, 200...
func (q QoS) RateGbps() float64 { return float64(q.RateMbps) / 1000 }

// RateMbpsOf reads a rate_limit in Gb/s as UFM sends it (2.5, 200); ok is
// false for a value that is not one of RateLimits.
func RateMbpsOf(gbps float64) (int, bool) {
	for _, r := range RateLimits {
		if float64(r)/1000 == gbps {
			return r, true
		}
	}
	return 0, false
}

// FormatRate writes a rate in Mb/s as Gb/s, as UFM does: "2.5", "200".
func FormatRate(mbps int) string {
	return strconv.FormatFloat(float64(mbps)/1000, 'f', -1, 64)
}

// RateLimitList is UFM's rate_limit values, as a refusal lists them.
func RateLimitList() string {
	s := ""
	for i, r := range RateLimits {
		if i > 0 {
			s += ", "
		}
		s += FormatRate(r)
	}
	return s
}

// OpenSMGroupQoS is what OpenSM applies to a partition whose line has no
// mtu=, rate= or sl= (3.3's defaults, read back from the SA): its IPoIB
// group at 2048 bytes (mtu_limit 2) and 10 Gb/s, SL 0, and no limit of the
// partition's on its unicast paths. UFM's defaults for a new pkey
// (DefaultQoS) differ in the rate: 2.5 Gb/s.
var OpenSMGroupQoS = QoS{MTULimit: 2, ServiceLevel: 0, RateMbps: 10000}

// rateCodesBeyond are the IBTA rate codes past UFM's list, in Mb/s.
var rateCodesBeyond = map[int]int{19: 28000, 20: 50000, 21: 400000, 22: 600000, 23: 800000, 24: 1200000}

// QoSOfCodes is the QoS of a partition line's mtu=, rate= and sl= (IBTA
// codes; 0: the flag is absent), OpenSM's defaults standing in for an absent
// flag. An MTU below 1024 bytes reads as mtu_limit 0; a rate code OpenSM
// does not know keeps its default.
func QoSOfCodes(mtu, rate, sl int) QoS {
	q := OpenSMGroupQoS
	if mtu > 0 && mtu < 8 {
		q.MTULimit = (128 << mtu) / 1024
	}
	switch {
	case rate >= firstRateCode && rate < firstRateCode+len(RateLimits):
		q.RateMbps = RateLimits[rate-firstRateCode]
	case rateCodesBeyond[rate] != 0:
		q.RateMbps = rateCodesBeyond[rate]
	}
	q.ServiceLevel = sl
	return q
}
