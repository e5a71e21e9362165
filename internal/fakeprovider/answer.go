package fakeprovider

import "strconv"

// DefaultAnswerSize is the approximate size in bytes of a 200 answer when
// Options.AnswerSize is zero: about what a real provider sends, so that
// benchmarks move realistic amounts of data.
const DefaultAnswerSize = 1024

const explanationField = `,"explanation":""`

// appendAnswer appends a 200 decision answer. size is the target size of the
// whole answer (padding goes into output.explanation); size < 0 means no
// explanation at all.
func appendAnswer(b []byte, id uint64, model string, created int64, q *decisionRequest, bodyLen int, size int) []byte {
	start := len(b)
	b = append(b, `{"id":"dec_`...)
	b = strconv.AppendUint(b, id, 10)
	b = append(b, `","object":"decision","model":`...)
	b = appendJSONString(b, model)
	b = append(b, `,"created":`...)
	b = strconv.AppendInt(b, created, 10)
	b = append(b, `,"output":`...)
	refusal := q.Input.refuse
	if refusal {
		b = append(b, `{"type":"refusal","refusal":`...)
		b = appendJSONString(b, Refusal)
	} else {
		b = appendOutput(b, q.Question)
	}

	var tailBuf [192]byte
	tail := append(tailBuf[:0], `},"usage":{"input_tokens":`...)
	in, out, total := usageFor(bodyLen)
	tail = strconv.AppendInt(tail, in, 10)
	tail = append(tail, `,"output_tokens":`...)
	tail = strconv.AppendInt(tail, out, 10)
	tail = append(tail, `,"total_tokens":`...)
	tail = strconv.AppendInt(tail, total, 10)
	tail = append(tail, `,"input_tokens_details":{"cached_tokens":0}}}`+"\n"...)

	if size >= 0 && !refusal {
		n := size - (len(b) - start) - len(tail) - len(explanationField)
		b = append(b, `,"explanation":"`...)
		b = append(b, padding(n)...)
		b = append(b, '"')
	}
	return append(b, tail...)
}

// hugeAnswerParts returns the prefix and suffix of a HugeAnswer body; the
// padding between them goes inside output.explanation, so an answer of any
// size at least len(prefix)+len(suffix) is valid JSON.
func hugeAnswerParts(id uint64, model string, created int64, bodyLen int) (prefix, suffix []byte) {
	prefix = append(prefix, `{"id":"dec_`...)
	prefix = strconv.AppendUint(prefix, id, 10)
	prefix = append(prefix, `","object":"decision","model":`...)
	prefix = appendJSONString(prefix, model)
	prefix = append(prefix, `,"created":`...)
	prefix = strconv.AppendInt(prefix, created, 10)
	prefix = append(prefix, `,"output":{"type":"predicate","value":true,"explanation":"`...)
	in, out, total := usageFor(bodyLen)
	suffix = append(suffix, `"},"usage":{"input_tokens":`...)
	suffix = strconv.AppendInt(suffix, in, 10)
	suffix = append(suffix, `,"output_tokens":`...)
	suffix = strconv.AppendInt(suffix, out, 10)
	suffix = append(suffix, `,"total_tokens":`...)
	suffix = strconv.AppendInt(suffix, total, 10)
	suffix = append(suffix, `,"input_tokens_details":{"cached_tokens":0}}}`...)
	return prefix, suffix
}
