package trinity

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/big"
)

// pickler writes plain values as a protocol-2 pickle without memo: the
// form upstream's reader accepts from any writer (EMPTY_DICT MARK …
// SETITEMS, BININT*/LONG1, BINFLOAT, BINUNICODE, NONE/NEWTRUE/NEWFALSE).
type pickler struct{ b []byte }

func (p *pickler) dump(v any) error {
	p.b = append(p.b, opProto, 2)
	if err := p.value(v); err != nil {
		return err
	}
	p.b = append(p.b, opStop)
	return nil
}

func (p *pickler) value(v any) error {
	switch x := v.(type) {
	case nil:
		p.b = append(p.b, opNone)
	case bool:
		if x {
			p.b = append(p.b, opNewTrue)
		} else {
			p.b = append(p.b, opNewFalse)
		}
	case int64:
		p.int(x)
	case *big.Int:
		p.bigInt(x)
	case float64:
		p.b = append(p.b, opBinFloat)
		p.b = binary.BigEndian.AppendUint64(p.b, math.Float64bits(x))
	case string:
		p.b = append(p.b, opBinUnicode)
		p.b = binary.LittleEndian.AppendUint32(p.b, uint32(len(x)))
		p.b = append(p.b, x...)
	case *List:
		p.b = append(p.b, opEmptyList)
		if len(x.Items) > 0 {
			p.b = append(p.b, opMark)
			for _, it := range x.Items {
				if err := p.value(it); err != nil {
					return err
				}
			}
			p.b = append(p.b, opAppends)
		}
	case *Dict:
		p.b = append(p.b, opEmptyDict)
		if len(x.Keys) > 0 {
			p.b = append(p.b, opMark)
			for i := range x.Keys {
				if err := p.value(x.Keys[i]); err != nil {
					return err
				}
				if err := p.value(x.Vals[i]); err != nil {
					return err
				}
			}
			p.b = append(p.b, opSetItems)
		}
	case Tuple:
		p.b = append(p.b, opMark)
		for _, it := range x {
			if err := p.value(it); err != nil {
				return err
			}
		}
		p.b = append(p.b, opTuple)
	default:
		return fmt.Errorf("cannot pickle %T", v)
	}
	return nil
}

func (p *pickler) int(x int64) {
	switch {
	case x >= 0 && x < 1<<8:
		p.b = append(p.b, opBinInt1, byte(x))
	case x >= 0 && x < 1<<16:
		p.b = append(p.b, opBinInt2, byte(x), byte(x>>8))
	case x >= math.MinInt32 && x <= math.MaxInt32:
		p.b = append(p.b, opBinInt)
		p.b = binary.LittleEndian.AppendUint32(p.b, uint32(int32(x)))
	default:
		p.bigInt(big.NewInt(x))
	}
}

// bigInt writes LONG1 with the shortest two's complement little-endian form.
func (p *pickler) bigInt(x *big.Int) {
	n := (x.BitLen() + 8) / 8 // one sign bit more than the magnitude needs
	v := new(big.Int).Set(x)
	if x.Sign() < 0 {
		v.Add(v, new(big.Int).Lsh(big.NewInt(1), uint(8*n)))
	}
	be := v.FillBytes(make([]byte, n))
	if n < 256 {
		p.b = append(p.b, opLong1, byte(n))
	} else {
		p.b = append(p.b, opLong4)
		p.b = binary.LittleEndian.AppendUint32(p.b, uint32(n))
	}
	for i := n - 1; i >= 0; i-- {
		p.b = append(p.b, be[i])
	}
}
