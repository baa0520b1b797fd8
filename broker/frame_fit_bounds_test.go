package broker

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// The byte boundaries of fitting an answer into a frame: a page, an item sent without its texts, query.slots'
// holders, a worker's message and a proxy call's arguments each fill their room to its last byte and not one byte past
// it. The scenarios that cut pages and pools and refuse messages and calls (pagefit_test.go, slots_fit_test.go,
// inbox_fit_test.go, proxy_fit_test.go) hold only that the answer fits; these pin the edge on both sides.

// frameCall is a request of id "1" on a connection of a server whose frames hold maxFrame bytes.
func frameCall(maxFrame int) *call {
	return &call{c: &conn{s: &Server{opts: Options{MaxFrame: maxFrame}}}, id: "1", method: "query.tasks"}
}

// TestPageFillsItsBudgetToTheLastByte: items whose JSON, each with its comma, takes exactly the page's budget are
// sent in one page; one byte more and the page is read again with the limit that fits.
func TestPageFillsItsBudgetToTheLastByte(t *testing.T) {
	cl := frameCall(4096)
	budget := pageBudget(cl)
	first := strings.Repeat("a", 100) // 102 bytes in JSON, 103 with its comma
	for name, tc := range map[string]struct {
		over       int
		wantItems  int
		wantLimits []int
	}{
		"exactly the budget": {over: 0, wantItems: 2, wantLimits: []int{2}},
		"one byte past it":   {over: 1, wantItems: 1, wantLimits: []int{2, 1}},
		"two bytes past it":  {over: 2, wantItems: 1, wantLimits: []int{2, 1}},
		"one byte within it": {over: -1, wantItems: 2, wantLimits: []int{2}},
	} {
		t.Run(name, func(t *testing.T) {
			second := strings.Repeat("b", budget-103-3+tc.over) // its quotes and comma take the other 3 bytes
			items := []string{first, second}
			var limits []int
			pg, err := fitPage(cl, 2, func(limit int) (page[string], error) {
				limits = append(limits, limit)
				p := page[string]{items: items[:limit], total: len(items)}
				if limit < len(items) {
					p.next = "c"
				}
				return p, nil
			}, same[string])
			require.NoError(t, err)
			require.Equal(t, items[:tc.wantItems], pg.items)
			require.Equal(t, tc.wantLimits, limits)
		})
	}
}

// TestItemOmittedPastItsRoom: an item is sent as it is while its JSON with its comma takes at most the omission's
// room, and without what omit leaves out from one byte past it.
func TestItemOmittedPastItsRoom(t *testing.T) {
	const room = 300
	om := omission[string]{room: room, omit: func(w *string) { *w = "omitted" }}
	for name, tc := range map[string]struct {
		chars int
		want  string
	}{
		"its room exactly":   {chars: room - 3, want: strings.Repeat("x", room-3)},
		"one byte within it": {chars: room - 4, want: strings.Repeat("x", room-4)},
		"one byte past it":   {chars: room - 2, want: "omitted"},
	} {
		t.Run(name, func(t *testing.T) {
			item := strings.Repeat("x", tc.chars) // its quotes and comma take the other 3 bytes
			pg, err := fitPageOmitting(frameCall(4096), 1, func(int) (page[string], error) {
				return page[string]{items: []string{item}, total: 1}, nil
			}, same[string], om)
			require.NoError(t, err)
			require.Equal(t, []string{tc.want}, pg.items)
		})
	}
}

// TestSlotsFillTheFrameToTheLastByte: a pool whose answer takes exactly the room beside the id is sent whole; one
// byte more and its holders are cut, subIdsOmitted true.
func TestSlotsFillTheFrameToTheLastByte(t *testing.T) {
	cl := frameCall(1024)
	room := wire.ResultRoom(cl.id, cl.c.s.opts.MaxFrame)
	pool := func(holder string) projections.Slots {
		return projections.Slots{Held: 2, Capacity: 64, SubIDs: []string{"gc-1", holder}}
	}
	b, err := json.Marshal(WireSlots{Slots: pool("")})
	require.NoError(t, err)
	fill := room - len(b)
	for name, tc := range map[string]struct {
		chars int
		whole bool
	}{
		"exactly the room":   {chars: fill, whole: true},
		"one byte within it": {chars: fill - 1, whole: true},
		"one byte past it":   {chars: fill + 1, whole: false},
	} {
		t.Run(name, func(t *testing.T) {
			s := pool(strings.Repeat("s", tc.chars))
			got := fitSlots(cl, s)
			if tc.whole {
				whole, err := json.Marshal(WireSlots{Slots: s})
				require.NoError(t, err)
				require.Equal(t, compactResult(whole), got)
				return
			}
			cut, ok := got.(WireSlots)
			require.True(t, ok, "a pool past the room is cut: %T", got)
			require.True(t, cut.SubIDsOmitted)
			require.Equal(t, []string{"gc-1"}, cut.SubIDs)
		})
	}
}

// TestSlotsHoldersCutCountEachComma: the holders of a pool too large for the frame are cut to the most whose answer,
// each holder with its comma, fits in the room; at every frame size the cut answer fits, and one more holder would
// not.
func TestSlotsHoldersCutCountEachComma(t *testing.T) {
	var holders []string
	for i := range 64 {
		holders = append(holders, strings.Repeat(string(rune('a'+i%26)), 30+i%7))
	}
	s := projections.Slots{Held: len(holders), Capacity: 64, SubIDs: holders}
	for frame := 1024; frame <= 2048; frame++ {
		cl := frameCall(frame)
		room := wire.ResultRoom(cl.id, cl.c.s.opts.MaxFrame)
		cut, ok := fitSlots(cl, s).(WireSlots)
		require.True(t, ok, "frame %d", frame)
		b, err := json.Marshal(cut)
		require.NoError(t, err)
		require.LessOrEqual(t, len(b), room, "frame %d: the cut answer fits", frame)
		n := len(cut.SubIDs)
		require.Equal(t, holders[:n], cut.SubIDs, "frame %d: the first holders, in order", frame)
		require.Less(t, n, len(holders), "frame %d", frame)
		// NB: the first holder is counted with a comma too, so the cut may leave one byte unused.
		require.Greater(t, len(b)+jsonLen(holders[n])+1, room-1, "frame %d: one more holder would not fit", frame)
	}
}

// TestPageCutCountsItsCursorAndKeepsWhatFits: a page cut short carries a next cursor, which takes its bytes in the
// same budget: items that fill the budget exactly with that cursor beside them are one page, one byte more and the
// last of them is left out. A page cut short is read again with the limit that held every item that fitted, not fewer.
func TestPageCutCountsItsCursorAndKeepsWhatFits(t *testing.T) {
	cl := frameCall(4096)
	budget := pageBudget(cl)
	// The cursor takes 22 bytes as nextCursor's value, the first two items 103 each with their commas; the last is
	// wider than the cursor, so it never fits after the third.
	cursor := strings.Repeat("c", 20)
	first, second, last := strings.Repeat("a", 100), strings.Repeat("b", 100), strings.Repeat("d", 50)
	for name, tc := range map[string]struct {
		over       int
		wantItems  int
		wantLimits []int
	}{
		"exactly the budget with the cursor": {over: 0, wantItems: 3, wantLimits: []int{4, 3}},
		"one byte within it":                 {over: -1, wantItems: 3, wantLimits: []int{4, 3}},
		"one byte past it":                   {over: 1, wantItems: 2, wantLimits: []int{4, 3, 2}},
	} {
		t.Run(name, func(t *testing.T) {
			third := strings.Repeat("t", budget-2*103-cursorBytes(cursor)-3+tc.over)
			items := []string{first, second, third, last}
			var limits []int
			pg, err := fitPage(cl, len(items), func(limit int) (page[string], error) {
				limits = append(limits, limit)
				p := page[string]{items: items[:limit], total: len(items)}
				if limit < len(items) {
					p.next = cursor
				}
				return p, nil
			}, same[string])
			require.NoError(t, err)
			require.Equal(t, items[:tc.wantItems], pg.items)
			require.Equal(t, tc.wantLimits, limits)
			require.Equal(t, cursor, pg.next)
		})
	}
}

// TestAMessageFillsThePageToTheLastByte: a worker's message is accepted while its widest copy (the widest the engine
// may make of it, messageFits), with its comma, takes at most the room of a page of its own answering a reader's
// widest request id, the room in which mailboxPage sends a message whole, and refused one byte past it.
func TestAMessageFillsThePageToTheLastByte(t *testing.T) {
	const frame = 4096
	_, p := orchestratorAndP(t, frame)
	widest := func(chars int) int {
		m := projections.Message{RunID: runR, From: taskP, To: taskQ, ID: widestMessageID(taskQ),
			Body: `"` + strings.Repeat("x", chars) + `"`, Kind: events.KindGroupJoin, Priority: events.PriorityNormal,
			DeliveryMode: events.DeliveryInterrupt, Status: projections.MessageAcknowledged,
			CreatedAt: widestMessageTime, DeliveredAt: widestMessageTime, AcknowledgedAt: widestMessageTime}
		b, err := json.Marshal(toWireMessage(m))
		require.NoError(t, err)
		return len(b) + 1
	}
	fill := inboxPageRoom(frame) - widest(0) // the body whose widest copy takes the room exactly
	for name, tc := range map[string]struct {
		chars    int
		accepted bool
	}{
		"exactly the room":   {chars: fill, accepted: true},
		"one byte within it": {chars: fill - 1, accepted: true},
		"one byte past it":   {chars: fill + 1, accepted: false},
	} {
		t.Run(name, func(t *testing.T) {
			r := p.call("msg.send", map[string]any{"to": taskQ, "body": strings.Repeat("x", tc.chars)})
			if tc.accepted {
				require.Nil(t, r.Error)
				return
			}
			require.NotNil(t, r.Error)
			require.Equal(t, wire.CodeOversizeFrame, r.Error.Code)
			require.Equal(t, "msg.send: body too large", r.Error.Message)
		})
	}
}

// TestProxyArgumentsFillTheManagersRoomToTheLastByte: a worker's proxy.request is let through while its
// proxy.requested event, at its widest and with its comma, takes at most the room the manager reads it in (an
// events.since page answering a reader's widest request id, a team.event push), and refused one byte past it.
func TestProxyArgumentsFillTheManagersRoomToTheLastByte(t *testing.T) {
	const frame = 4096
	c := &conn{s: &Server{opts: Options{MaxFrame: frame}}}
	request := func(chars int) *commands.ProxyRequest {
		return &commands.ProxyRequest{RunID: runR, TaskID: taskP, JobID: "J", RequestID: "r1", RequestIDChars: 2,
			Tool: "read", Args: json.RawMessage(`{"a":"` + strings.Repeat("x", chars) + `"}`)}
	}
	empty := request(0)
	b, err := widestProxyRequested(empty, "cmd-1", string(empty.Args))
	require.NoError(t, err)
	fill := proxyRequestedRoom(frame) - (len(b) + 1) // the arguments whose event takes the room exactly
	for name, tc := range map[string]struct {
		chars int
		fits  bool
	}{
		"exactly the room":   {chars: fill, fits: true},
		"one byte within it": {chars: fill - 1, fits: true},
		"one byte past it":   {chars: fill + 1, fits: false},
	} {
		t.Run(name, func(t *testing.T) {
			err := c.argsFit(request(tc.chars), "cmd-1")
			if tc.fits {
				require.NoError(t, err)
				return
			}
			var we *wire.Error
			require.ErrorAs(t, err, &we)
			require.Equal(t, wire.CodeOversizeFrame, we.Code)
			require.Equal(t, "proxy.request: arguments too large", we.Message)
		})
	}
}
