// Moves by HTML5 drag and drop on the library page: a cartridge (a draggable cell or drive
// bay) dropped on an empty slot, mail slot or drive bay. One listener per event type on the
// board, none on the cells.

/**
 * Listens on `board` and calls `onMove(from, to)` (element addresses) for each drop.
 * Returns `{ dragging }`: whether a drag is under way (the page holds its refresh meanwhile).
 */
export function dragMoves(board, { canOperate, onMove }) {
  let dragFrom = null;
  const draggableAt = (target) => target.closest && target.closest('[draggable="true"][data-address]');
  const dropAt = (target) => {
    const node = target.closest && target.closest("[data-address]");
    if (!node || !board.contains(node) || node.dataset.barcode || node.dataset.action) return null;
    return node;
  };

  board.addEventListener("dragstart", (event) => {
    const node = draggableAt(event.target);
    if (!node || !canOperate) {
      event.preventDefault();
      return;
    }
    dragFrom = Number(node.dataset.address);
    event.dataTransfer.effectAllowed = "move";
    event.dataTransfer.setData("text/plain", `${node.dataset.barcode || ""}@${node.dataset.address}`);
    node.classList.add("dragging");
    board.classList.add("drag-active");
  });

  board.addEventListener("dragover", (event) => {
    if (dragFrom === null) return;
    const node = dropAt(event.target);
    if (!node) return;
    event.preventDefault();
    event.dataTransfer.dropEffect = "move";
    for (const n of board.querySelectorAll(".drop-hover")) if (n !== node) n.classList.remove("drop-hover");
    node.classList.add("drop-hover");
  });

  board.addEventListener("dragleave", (event) => {
    const node = dropAt(event.target);
    if (node && !node.contains(event.relatedTarget)) node.classList.remove("drop-hover");
  });

  const endDrag = () => {
    dragFrom = null;
    board.classList.remove("drag-active");
    for (const n of board.querySelectorAll(".dragging, .drop-hover")) n.classList.remove("dragging", "drop-hover");
  };

  board.addEventListener("drop", (event) => {
    const node = dropAt(event.target);
    const from = dragFrom;
    endDrag();
    if (!node || from === null) return;
    event.preventDefault();
    const to = Number(node.dataset.address);
    if (to === from) return;
    onMove(from, to);
  });

  board.addEventListener("dragend", endDrag);

  return { dragging: () => dragFrom !== null };
}
