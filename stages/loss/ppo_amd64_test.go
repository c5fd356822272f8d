//go:build amd64 && !purego && !amd64.v3

package loss

import (
	"os"
	"regexp"
	"strconv"
	"testing"
	"unsafe"
)

// TestPPOArgsLayout pins the offsets ppo_amd64.s reads (its #defines) to
// the fields of ppoArgs and ppoConsts.
func TestPPOArgsLayout(t *testing.T) {
	var a ppoArgs
	var k ppoConsts
	want := map[string]uintptr{
		"A_LP": unsafe.Offsetof(a.lp), "A_OLD": unsafe.Offsetof(a.old), "A_ADV": unsafe.Offsetof(a.adv),
		"A_MASK": unsafe.Offsetof(a.mask), "A_GRAD": unsafe.Offsetof(a.grad), "A_N": unsafe.Offsetof(a.n),
		"A_SL":    unsafe.Offsetof(a.sums) + unsafe.Offsetof(a.sums.L),
		"A_SCLIP": unsafe.Offsetof(a.sums) + unsafe.Offsetof(a.sums.Clip),
		"A_SLOW":  unsafe.Offsetof(a.sums) + unsafe.Offsetof(a.sums.Low),
		"A_SKL":   unsafe.Offsetof(a.sums) + unsafe.Offsetof(a.sums.KL),
		"A_LO":    unsafe.Offsetof(a.lo), "A_HI": unsafe.Offsetof(a.hi), "A_C3": unsafe.Offsetof(a.c3),
		"A_GS": unsafe.Offsetof(a.gs), "A_K": unsafe.Offsetof(a.k),
		"A_W": unsafe.Offsetof(a.w), "A_WSTEP": unsafe.Offsetof(a.wStep),
		"K_INVSTEP": unsafe.Offsetof(k.invStep), "K_ROUND": unsafe.Offsetof(k.round),
		"K_LN2HI": unsafe.Offsetof(k.ln2Hi), "K_LN2LO": unsafe.Offsetof(k.ln2Lo),
		"K_C5": unsafe.Offsetof(k.c5), "K_C4": unsafe.Offsetof(k.c4), "K_C3": unsafe.Offsetof(k.c3),
		"K_C2": unsafe.Offsetof(k.c2), "K_ONE": unsafe.Offsetof(k.one),
		"K_MIND": unsafe.Offsetof(k.minD), "K_MAXD": unsafe.Offsetof(k.maxD),
		"K_SIGN": unsafe.Offsetof(k.sign), "K_HALF": unsafe.Offsetof(k.half),
		"K_LOW6": unsafe.Offsetof(k.low6), "K_HIGH58": unsafe.Offsetof(k.high58),
		"K_TABLE": unsafe.Offsetof(k.table),
	}
	src, err := os.ReadFile("ppo_amd64.s")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]uintptr{}
	for _, m := range regexp.MustCompile(`(?m)^#define ([AK]_\w+) (\d+)$`).FindAllStringSubmatch(string(src), -1) {
		v, err := strconv.ParseUint(m[2], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		got[m[1]] = uintptr(v)
	}
	for name, off := range want {
		if g, ok := got[name]; !ok || g != off {
			t.Errorf("%s: ppo_amd64.s has %d (defined: %v), the struct %d", name, g, ok, off)
		}
	}
	if len(got) != len(want) {
		t.Errorf("ppo_amd64.s defines %d offsets, the test pins %d", len(got), len(want))
	}
}
