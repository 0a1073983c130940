"""Orders can be cancelled: the time a cancel was asked of a running order.

Revision ID: 0008_cancel
Revises: 0007_party_nodes
Create Date: 2026-11-26 10:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0008_cancel'
down_revision: str | None = '0007_party_nodes'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('order', schema=None) as batch_op:
        batch_op.add_column(
            sa.Column('cancel_requested_at', sa.DateTime(timezone=True), nullable=True)
        )


def downgrade() -> None:
    with op.batch_alter_table('order', schema=None) as batch_op:
        batch_op.drop_column('cancel_requested_at')
