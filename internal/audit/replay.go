package audit

import "context"

// Trail returns every entry of subject in seq order, paging through List
// MaxListLimit entries at a time: the whole trail a record (a step test,
// an operating envelope) is replayed from.
func (l *Log) Trail(ctx context.Context, subject string) ([]Entry, error) {
	var out []Entry
	for after := int64(0); ; {
		page, err := l.List(ctx, after, MaxListLimit, subject)
		if err != nil {
			return nil, err
		}
		out = append(out, page...)
		if len(page) < MaxListLimit {
			return out, nil
		}
		after = page[len(page)-1].Seq
	}
}

// Replay lists the records whose trail starts with action (an issue
// entry): the subjects of the newest such entries of line (every line
// when empty), newest first, at most limit, each replayed by load. A
// subject whose trail load refuses (it does not verify) is never listed
// but returned apart in bad.
func Replay[R any](ctx context.Context, l *Log, action, line string, limit int, load func(ctx context.Context, subject string) (R, error)) (out []R, bad []string, err error) {
	q := Query{Action: action, Newest: true, Limit: limit}
	if line != "" {
		q.Lines = []string{line}
	}
	entries, err := l.Query(ctx, q)
	if err != nil {
		return nil, nil, err
	}
	for _, en := range entries {
		r, err := load(ctx, en.Subject)
		if err != nil {
			bad = append(bad, en.Subject)
			continue
		}
		out = append(out, r)
	}
	return out, bad, nil
}
