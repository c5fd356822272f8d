package advantage

import (
	"github.com/rftpipe/rftpipe/stages/args"
)

// Resolve validates user args of fn against params with stages/args' two
// upstream layers (nil: default_args(), then constructor defaults for the
// rest; a given dict: constructor defaults for the keys it omits). Errors
// wrap schema.ErrBadInput, name the fn and list what is valid.
func Resolve(fn string, params args.Schema, user map[string]any) (args.Values, error) {
	v, err := params.Resolve(user)
	if err != nil {
		return nil, errorf(fn, "%v", err)
	}
	return v, nil
}

// singleton returns the singleton_group_policy arg.
func singleton(a args.Values) SingletonPolicy {
	for i, n := range singletonNames {
		if n == a.String(paramSingleton.Name) {
			return SingletonPolicy(i)
		}
	}
	return SingletonUpstream
}

// param declares an arg whose constructor default is also its default_args() value.
func param(name string, kind args.Kind, def any, doc string) args.Param {
	return args.Param{Name: name, Kind: kind, Nullable: def == nil, Ctor: def, Default: def, InDefaults: true, Doc: doc}
}

// flag declares an opt-in quirk fix: a bool, false by default, absent from
// default_args() (upstream has no such arg).
func flag(name, doc string) args.Param {
	return args.Param{Name: name, Kind: args.Bool, Ctor: false, Doc: doc}
}

// Shared params of the group-relative fns.
var (
	paramEpsilon = param("epsilon", args.Float, 1e-6, "added to the std in the denominator")
	paramStdCal  = args.Param{Name: "std_cal_level", Kind: args.String, Ctor: "group", Default: "group", InDefaults: true,
		Choices: []string{"group", "batch"}, Doc: "std of the group, or of the whole batch"}
	paramStdThreshold = param("std_threshold", args.Float, nil,
		"drop groups whose std <= threshold (and singleton groups); null: no filter")
	paramSingleton = args.Param{Name: "singleton_group_policy", Kind: args.String, Ctor: "upstream", Choices: singletonNames,
		Doc: "one-experience groups (Q-02/Q-03): upstream | unit (mean 0, std 1; REC does not fail) | zero (advantage 0) | drop"}
	paramOPMDBaseline = args.Param{Name: "opmd_baseline", Kind: args.String, Ctor: "mean", Default: "mean", InDefaults: true,
		Choices: []string{"mean", "logavgexp"}, Doc: "group mean, or tau·log-avg-exp(R/tau) (Q-30: other values rejected)"}
	paramTau           = param("tau", args.Float, 1.0, "logavgexp temperature")
	paramBaselineShift = param("baseline_shift", args.Float, -0.1, "added to the group mean")
)
