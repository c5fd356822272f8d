//go:build race

package loss

// nanPayloads is false in a race-detector build: its instrumentation
// changes the registers, and with them which operand of a NaN-propagating
// operation the compiled Go loop keeps, so a NaN's payload may differ from
// the vector loop's (every other bit still agrees).
const nanPayloads = false
