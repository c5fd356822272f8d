//go:build amd64 && !purego && !amd64.v3

package loss

import (
	"os"
	"regexp"
	"strconv"
	"testing"
	"unsafe"
)

// TestCoreConstsLayout pins the offsets of core_amd64.h, the header the
// three token loops share, to the fields of ppoConsts and coreConsts.
func TestCoreConstsLayout(t *testing.T) {
	var k ppoConsts
	var c coreConsts
	asmOffsets(t, "core_amd64.h", map[string]uintptr{
		"K_INVSTEP": unsafe.Offsetof(k.invStep), "K_ROUND": unsafe.Offsetof(k.round),
		"K_LN2HI": unsafe.Offsetof(k.ln2Hi), "K_LN2LO": unsafe.Offsetof(k.ln2Lo),
		"K_C5": unsafe.Offsetof(k.c5), "K_C4": unsafe.Offsetof(k.c4), "K_C3": unsafe.Offsetof(k.c3),
		"K_C2": unsafe.Offsetof(k.c2), "K_ONE": unsafe.Offsetof(k.one),
		"K_MIND": unsafe.Offsetof(k.minD), "K_MAXD": unsafe.Offsetof(k.maxD),
		"K_SIGN": unsafe.Offsetof(k.sign), "K_HALF": unsafe.Offsetof(k.half),
		"K_LOW6": unsafe.Offsetof(k.low6), "K_HIGH58": unsafe.Offsetof(k.high58),
		"K_TABLE": unsafe.Offsetof(k.table),
		"S_DMIN":  unsafe.Offsetof(c.dMin), "S_DMAX": unsafe.Offsetof(c.dMax),
		"S_ZMIN": unsafe.Offsetof(c.zMin), "S_ZMAX": unsafe.Offsetof(c.zMax), "S_FOURS": unsafe.Offsetof(c.fours),
	})
}

// TestPPOArgsLayout pins the offsets ppo_amd64.s reads (its #defines) to
// the fields of ppoArgs.
func TestPPOArgsLayout(t *testing.T) {
	var a ppoArgs
	asmOffsets(t, "ppo_amd64.s", map[string]uintptr{
		"A_LP": unsafe.Offsetof(a.lp), "A_OLD": unsafe.Offsetof(a.old), "A_ADV": unsafe.Offsetof(a.adv),
		"A_MASK": unsafe.Offsetof(a.mask), "A_GRAD": unsafe.Offsetof(a.grad), "A_N": unsafe.Offsetof(a.n),
		"A_SL":    unsafe.Offsetof(a.sums) + unsafe.Offsetof(a.sums.L),
		"A_SCLIP": unsafe.Offsetof(a.sums) + unsafe.Offsetof(a.sums.Clip),
		"A_SLOW":  unsafe.Offsetof(a.sums) + unsafe.Offsetof(a.sums.Low),
		"A_SKL":   unsafe.Offsetof(a.sums) + unsafe.Offsetof(a.sums.KL),
		"A_LO":    unsafe.Offsetof(a.lo), "A_HI": unsafe.Offsetof(a.hi), "A_C3": unsafe.Offsetof(a.c3),
		"A_GS": unsafe.Offsetof(a.gs), "A_K": unsafe.Offsetof(a.k),
		"A_W": unsafe.Offsetof(a.w), "A_WSTEP": unsafe.Offsetof(a.wStep),
	})
}

// asmOffsets checks that the #defines of struct offsets in an assembly
// file or header (the names that start A_, K_ or S_) are those of want,
// and no more.
func asmOffsets(t *testing.T, file string, want map[string]uintptr) {
	t.Helper()
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]uintptr{}
	for _, m := range regexp.MustCompile(`(?m)^#define ([AKS]_\w+) (\d+)$`).FindAllStringSubmatch(string(src), -1) {
		v, err := strconv.ParseUint(m[2], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		got[m[1]] = uintptr(v)
	}
	for name, off := range want {
		if g, ok := got[name]; !ok || g != off {
			t.Errorf("%s: %s has %d (defined: %v), the struct %d", name, file, g, ok, off)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%s defines %d offsets, the test pins %d", file, len(got), len(want))
	}
}

// TestSAPOArgsLayout pins the offsets sapo_amd64.s reads to the fields of
// sapoArgs.
func TestSAPOArgsLayout(t *testing.T) {
	var a sapoArgs
	sum := unsafe.Offsetof(a.sums)
	asmOffsets(t, "sapo_amd64.s", map[string]uintptr{
		"A_LP": unsafe.Offsetof(a.lp), "A_OLD": unsafe.Offsetof(a.old), "A_ADV": unsafe.Offsetof(a.adv),
		"A_MASK": unsafe.Offsetof(a.mask), "A_GRAD": unsafe.Offsetof(a.grad), "A_N": unsafe.Offsetof(a.n),
		"A_SL": sum + unsafe.Offsetof(a.sums.L), "A_SKL": sum + unsafe.Offsetof(a.sums.KL),
		"A_SGATE": sum + unsafe.Offsetof(a.sums.Gate), "A_SRATIO": sum + unsafe.Offsetof(a.sums.Ratio),
		"A_SPOS":   sum + unsafe.Offsetof(a.sums.Pos),
		"A_TAUPOS": unsafe.Offsetof(a.tauPos), "A_TAUNEG": unsafe.Offsetof(a.tauNeg), "A_GS": unsafe.Offsetof(a.gs),
		"A_K": unsafe.Offsetof(a.k), "A_CK": unsafe.Offsetof(a.ck),
		"A_W": unsafe.Offsetof(a.w), "A_WSTEP": unsafe.Offsetof(a.wStep),
		"A_CLAMPD": unsafe.Offsetof(a.clampD), "A_PAPER": unsafe.Offsetof(a.paper),
	})
}

// TestCISPOArgsLayout pins the offsets cispo_amd64.s reads to the fields
// of cispoArgs.
func TestCISPOArgsLayout(t *testing.T) {
	var a cispoArgs
	sum := unsafe.Offsetof(a.sums)
	asmOffsets(t, "cispo_amd64.s", map[string]uintptr{
		"A_LP": unsafe.Offsetof(a.lp), "A_OLD": unsafe.Offsetof(a.old), "A_ADV": unsafe.Offsetof(a.adv),
		"A_MASK": unsafe.Offsetof(a.mask), "A_GRAD": unsafe.Offsetof(a.grad), "A_N": unsafe.Offsetof(a.n),
		"A_SL": sum + unsafe.Offsetof(a.sums.L), "A_SKL": sum + unsafe.Offsetof(a.sums.KL),
		"A_SKEEP": sum + unsafe.Offsetof(a.sums.Keep),
		"A_LO":    unsafe.Offsetof(a.lo), "A_HI": unsafe.Offsetof(a.hi),
		"A_MASKLO": unsafe.Offsetof(a.maskLo), "A_MASKHI": unsafe.Offsetof(a.maskHi), "A_GS": unsafe.Offsetof(a.gs),
		"A_K": unsafe.Offsetof(a.k), "A_CK": unsafe.Offsetof(a.ck),
		"A_W": unsafe.Offsetof(a.w), "A_WSTEP": unsafe.Offsetof(a.wStep),
		"A_MASKCLIP": unsafe.Offsetof(a.maskClip), "A_VERL": unsafe.Offsetof(a.verl),
	})
}
