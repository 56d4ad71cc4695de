from dataclasses import dataclass

from journal_app.rounds import complete_prefix_end, group_rounds


@dataclass
class E:
    seq: int
    kind: str
    role: str
    tool_call_id: str = ""


def test_it_keeps_parallel_calls_and_their_results_in_one_round():
    entries = [
        E(1, "message", "user"),
        E(2, "message", "assistant"),
        E(3, "tool_call", "assistant", "a"),
        E(4, "tool_call", "assistant", "b"),
        E(5, "tool_result", "tool", "a"),
        E(6, "tool_result", "tool", "b"),
        E(7, "message", "assistant"),
    ]
    rounds = group_rounds(entries)
    assert [r.kind for r in rounds] == ["message", "api", "api"]
    assert rounds[1].seqs == [2, 3, 4, 5, 6]
    assert rounds[1].parallel and rounds[1].status == "complete"
    assert rounds[2].seqs == [7]


def test_it_marks_an_interrupted_tail_and_leaves_it_out_of_the_foldable_prefix():
    entries = [
        E(1, "message", "user"),
        E(2, "tool_call", "assistant", "a"),
        E(3, "tool_result", "tool", "a"),
        E(4, "tool_call", "assistant", "b"),
        E(5, "tool_call", "assistant", "c"),
        E(6, "tool_result", "tool", "b"),
    ]
    rounds = group_rounds(entries)
    tail = rounds[-1]
    assert tail.at_tail and tail.status == "interrupted"
    assert tail.interrupted_call_ids == ["c"]
    assert complete_prefix_end(rounds) == 3


def test_an_interrupted_round_followed_by_more_work_is_final_and_foldable():
    entries = [
        E(1, "tool_call", "assistant", "a"),
        E(2, "event", "runtime"),
        E(3, "message", "user"),
        E(4, "message", "assistant"),
    ]
    rounds = group_rounds(entries)
    assert rounds[0].status == "interrupted" and not rounds[0].at_tail
    assert rounds[0].seqs == [1, 2]
    assert complete_prefix_end(rounds) == 4


def test_a_late_result_joins_the_round_of_its_call():
    entries = [
        E(1, "tool_call", "assistant", "a"),
        E(2, "message", "user"),
        E(3, "tool_result", "tool", "a"),
    ]
    rounds = group_rounds(entries)
    assert rounds[0].seqs == [1, 3] and rounds[0].status == "complete"
    assert rounds[1].seqs == [2]
